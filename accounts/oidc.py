"""Sign-in through an institution's OpenID Connect provider (django-allauth does the flow,
with PKCE): what the portal adds is signing out of the provider too (RP-initiated logout)
and reading the groups claim (groups/receivers.py applies it)."""

from __future__ import annotations

import logging
from urllib.parse import urlencode

import requests
from django.conf import settings
from django.core.cache import cache

log = logging.getLogger(__name__)
SESSION_KEY = "signed_in_via_oidc"
DISCOVERY_SECONDS = 3600


def discovery() -> dict:
    """The provider's /.well-known/openid-configuration, kept an hour; {} when it does not
    answer (signing out of the portal never waits on it for long)."""
    url = settings.OIDC_SERVER_URL.rstrip("/") + "/.well-known/openid-configuration"
    key = f"oidc:discovery:{url}"
    found = cache.get(key)
    if found is None:
        try:
            response = requests.get(url, timeout=5)
            response.raise_for_status()
            found = response.json()
        except (requests.RequestException, ValueError) as exc:
            log.warning("OpenID provider discovery failed: %s", exc)
            return {}
        cache.set(key, found, DISCOVERY_SECONDS)
    return found


def end_session_url(post_logout_redirect_uri: str) -> str | None:
    """Where to send a user who signed in through the provider when they sign out, so the
    provider's session ends too; None when the provider has no end-session endpoint."""
    endpoint = discovery().get("end_session_endpoint")
    if not endpoint:
        return None
    query = {"client_id": settings.OIDC_CLIENT_ID, "post_logout_redirect_uri": post_logout_redirect_uri}
    return f"{endpoint}?{urlencode(query)}"


def claimed_groups(extra_data: dict) -> list[str]:
    """The values of the provider's groups claim (userinfo preferred, else the ID token), as
    given: an admin ties a portal group to one of them (groups.Group.claim_value), so a claim
    never makes anyone a member of a group nobody tied to it."""
    claim = settings.OIDC_GROUPS_CLAIM
    values = (extra_data.get("userinfo") or {}).get(claim)
    if values is None:
        values = (extra_data.get("id_token") or {}).get(claim, [])
    if isinstance(values, str):
        values = [values]
    if not isinstance(values, list):
        return []
    return sorted({value.strip() for value in values if isinstance(value, str) and value.strip()})
