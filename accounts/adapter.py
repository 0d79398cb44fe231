"""django-allauth's account adapter, with the portal's sign-in limits.

allauth counts failed sign-ins per address and per login name ("5 in 5 minutes for this
name"), so anyone who knows an admin's name could lock that admin out from anywhere. Here the
per-name count is kept per name *and* address: an abuser spends their own attempts on their
own address, and the owner signs in from theirs. Guessing one account from many addresses
still meets the per-address limit at each of them (SIGN_IN_FAILURES_PER_MINUTE).

Where a sign-in or sign-up goes next (`next`) is a path of this site only, and a sign-up's
`next` (an invitation's link) rides in the verification link it e-mails, so the new user comes
back there once verified, in whichever browser they open it."""

from types import SimpleNamespace
from urllib.parse import urlencode, urlsplit

from allauth.account.adapter import DefaultAccountAdapter
from allauth.socialaccount.adapter import DefaultSocialAccountAdapter
from allauth.utils import get_request_param
from django.conf import settings

from accounts import oidc
from foundation.ratelimit import client_ip


def local_path(url) -> bool:
    """A path of this site ("/groups/..."), nothing that leaves it: no scheme or host, neither
    "//host" nor "/\\host" (browsers read both as another host), no control characters."""
    if not isinstance(url, str) or not url.startswith("/") or url.startswith("//") or len(url) > 2000:
        return False
    if "\\" in url or any(ord(char) < 32 or ord(char) == 127 for char in url):
        return False
    parts = urlsplit(url)
    return not parts.scheme and not parts.netloc


class AccountAdapter(DefaultAccountAdapter):
    def is_safe_url(self, url) -> bool:
        # allauth also takes an absolute URL of any allowed host or trusted origin: a redirect
        # after sign-in or sign-up stays on the portal's own paths.
        return local_path(url)

    def get_email_confirmation_url(self, request, emailconfirmation) -> str:
        url = super().get_email_confirmation_url(request, emailconfirmation)
        wanted = get_request_param(request, "next") if request is not None else None
        if wanted and local_path(wanted):
            # allauth's confirmation page honours `next` (checked again by is_safe_url).
            url += "?" + urlencode({"next": wanted})
        return url

    def get_client_ip(self, request) -> str:
        # The same address the portal's own limits use (behind TRUSTED_PROXY_COUNT proxies).
        return client_ip(request)

    def _get_login_attempts_cache_key(self, request, **credentials) -> str:
        # allauth's key for the per-name count ("<site>:<login>"), narrowed to this address.
        return f"{super()._get_login_attempts_cache_key(request, **credentials)}:{client_ip(request)}"

    def send_mail(self, template_prefix: str, email: str, context: dict) -> None:
        # allauth's e-mails name "the site" from the request's host ("Hello from 127.0.0.1:8000!"):
        # the portal's own name and address instead.
        site = SimpleNamespace(name=settings.SITE_NAME, domain=urlsplit(settings.SITE_URL).netloc)
        super().send_mail(template_prefix, email, {"current_site": site, **context})

    def format_email_subject(self, subject) -> str:
        return f"[{settings.SITE_NAME}] {subject}"

    def get_logout_redirect_url(self, request) -> str:
        """Signed in through the institution's provider: sign out there too (computed before
        the portal's session ends, which holds how the user signed in)."""
        here = super().get_logout_redirect_url(request)
        if request.session.get(oidc.SESSION_KEY):
            return oidc.end_session_url(request.build_absolute_uri(here)) or here
        return here


class SocialAccountAdapter(DefaultSocialAccountAdapter):
    """Sign-ups through the provider: allowed whenever a provider is configured."""

    def is_open_for_signup(self, request, sociallogin) -> bool:
        return bool(settings.OIDC_SERVER_URL) or super().is_open_for_signup(request, sociallogin)
