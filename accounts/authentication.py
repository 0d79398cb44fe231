from datetime import timedelta

from django.utils import timezone
from rest_framework import authentication, exceptions

from accounts.models import ApiToken

LAST_USED_RESOLUTION = timedelta(minutes=1)


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
        token = ApiToken.objects.select_related("user").filter(key_hash=ApiToken.hash_key(key)).first()
        if token is None or not token.user.is_active:
            raise exceptions.AuthenticationFailed("Invalid or revoked API token.")
        now = timezone.now()
        if token.last_used_at is None or now - token.last_used_at >= LAST_USED_RESOLUTION:
            # A write per request would cost every API call a commit (the submit path);
            # "last used" to the minute is what the settings page shows.
            ApiToken.objects.filter(pk=token.pk).update(last_used_at=now)
        return token.user, token

    def authenticate_header(self, request):
        return self.keyword
