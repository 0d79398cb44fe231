"""django-allauth's account adapter, with the portal's sign-in limits.

allauth counts failed sign-ins per address and per login name ("5 in 5 minutes for this
name"), so anyone who knows an admin's name could lock that admin out from anywhere. Here the
per-name count is kept per name *and* address: an abuser spends their own attempts on their
own address, and the owner signs in from theirs. Guessing one account from many addresses
still meets the per-address limit at each of them (SIGN_IN_FAILURES_PER_MINUTE)."""

from types import SimpleNamespace
from urllib.parse import urlsplit

from allauth.account.adapter import DefaultAccountAdapter
from allauth.socialaccount.adapter import DefaultSocialAccountAdapter
from django.conf import settings

from accounts import oidc
from foundation.ratelimit import client_ip


class AccountAdapter(DefaultAccountAdapter):
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
