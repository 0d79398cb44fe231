"""A user's e-mail addresses as allauth keeps them."""

from __future__ import annotations

from allauth.account.models import EmailAddress


def verified_addresses(user) -> set[str]:
    """The addresses the user has confirmed, lower-cased (empty for an anonymous user)."""
    if not getattr(user, "pk", None):
        return set()
    addresses = EmailAddress.objects.filter(user=user, verified=True).values_list("email", flat=True)
    return {email.lower() for email in addresses}
