"""Who earns nothing, and whose referral waits for a person.

- Self-referral earns nothing: the same user, an e-mail address the referrer has verified,
  or the same mailbox written differently (`normalise_email`).
- Disposable e-mail domains (the maintained `disposable-email-domains` list) earn nothing.
- An invitee seen from the referrer's address or browser within REFERRAL_SHARED_PLACE_DAYS
  is held for review: the referral grants wait in marketing's queue.
"""

from __future__ import annotations

from datetime import timedelta

from allauth.account.models import EmailAddress
from disposable_email_domains import blocklist
from django.conf import settings
from django.db.models import Q
from django.utils import timezone

from credits.models import Sighting

# Providers that deliver a.b.c@ to abc@; googlemail.com is gmail.com.
DOTS_IGNORED = frozenset({"gmail.com"})
DOMAIN_ALIASES = {"googlemail.com": "gmail.com"}


def normalise_email(email: str) -> str:
    """One spelling per mailbox: lower case, no +tag, and no dots where the provider ignores them."""
    local, _, domain = email.strip().lower().rpartition("@")
    if not local:
        return email.strip().lower()
    domain = DOMAIN_ALIASES.get(domain, domain)
    local = local.split("+", 1)[0]
    if domain in DOTS_IGNORED:
        local = local.replace(".", "")
    return f"{local}@{domain}"


def is_disposable(email: str) -> bool:
    domain = email.strip().lower().rpartition("@")[2]
    parts = domain.split(".")
    # A subdomain of a listed domain (x.mailinator.com) is the same service.
    return any(".".join(parts[index:]) in blocklist for index in range(len(parts) - 1))


def self_referral_reason(invitee, referrer) -> str:
    if referrer.pk == invitee.pk:
        return "self-referral: the same account"
    invitee_email = invitee.email.strip().lower()
    if EmailAddress.objects.filter(user=referrer, verified=True, email__iexact=invitee_email).exists():
        return "self-referral: an e-mail address the referrer has verified"
    referrer_mailboxes = {normalise_email(referrer.email)} | {
        normalise_email(address)
        for address in EmailAddress.objects.filter(user=referrer).values_list("email", flat=True)
    }
    if normalise_email(invitee.email) in referrer_mailboxes:
        return "self-referral: the referrer's mailbox written differently"
    return ""


def shared_place_reason(referrer_id: int, ip: str | None, browser_id: str, now=None) -> str:
    """Why the invitee looks like the referrer (same address or browser lately), or ""."""
    since = (now or timezone.now()) - timedelta(days=settings.REFERRAL_SHARED_PLACE_DAYS)
    seen = Sighting.objects.filter(user_id=referrer_id, last_seen__gte=since)
    if browser_id and seen.filter(browser_id=browser_id).exists():
        return f"same browser as the referrer within {settings.REFERRAL_SHARED_PLACE_DAYS} days"
    if ip and seen.filter(Q(ip=ip)).exists():
        return f"same address ({ip}) as the referrer within {settings.REFERRAL_SHARED_PLACE_DAYS} days"
    return ""


def record_sighting(user_id: int, ip: str | None, browser_id: str) -> None:
    Sighting.objects.update_or_create(
        user_id=user_id, ip=ip or None, browser_id=browser_id or "", defaults={"last_seen": timezone.now()}
    )
