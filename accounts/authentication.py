from datetime import timedelta

from django.utils import timezone
from rest_framework import authentication, exceptions

from accounts.models import ApiToken

LAST_USED_RESOLUTION = timedelta(minutes=1)


def usable_token(key: str) -> ApiToken | None:
    """The API token with this key, if it exists and its user is active (the API's bearer
    authentication, and the session proxy's: interactive/access.py)."""
    token = ApiToken.objects.select_related("user").filter(key_hash=ApiToken.hash_key(key)).first()
    return token if token is not None and token.user.is_active else None


class BearerTokenAuthentication(authentication.BaseAuthentication):
    """`Authorization: Bearer gpt_...`: a token a user made on their settings page."""

    keyword = "Bearer"

    def authenticate(self, request):
        header = authentication.get_authorization_header(request).decode("latin-1")
        scheme, _space, key = header.partition(" ")
        # The scheme's name is case-insensitive (RFC 9110); "bearer gpt_..." is as good.
        if scheme.lower() != self.keyword.lower():
            return None
        key = key.strip()
        if not key:
            raise exceptions.AuthenticationFailed("Empty bearer token.")
        token = usable_token(key)
        if token is None:
            raise exceptions.AuthenticationFailed("Invalid or revoked API token.")
        now = timezone.now()
        if token.last_used_at is None or now - token.last_used_at >= LAST_USED_RESOLUTION:
            # A write per request would cost every API call a commit (the submit path);
            # "last used" to the minute is what the settings page shows.
            ApiToken.objects.filter(pk=token.pk).update(last_used_at=now)
        return token.user, token

    def authenticate_header(self, request):
        return self.keyword
