"""Credits' writes: the only entry for views, the API, tasks, the admin and other apps.

Each is atomic under the account's row lock and keyed for idempotency; a person's act is
audited (docs/architecture.md, "The skeleton of an app"). The ledger's rules live in ledger.py
(append-only entries, lots that expire, balances as sums), the grant rules in grants.py and
campaigns.py; credits' own modules call those directly, everyone else calls these.
gpupool/tests/test_layers.py holds every caller outside credits' internals to it.
"""

from __future__ import annotations

from credits import campaigns, grants, ledger
from credits.models import Campaign, HeldGrant, LedgerEntry


def grant(
    user_id: int,
    amount: int,
    *,
    key: str,
    grant_kind: str,
    campaign_id: int | None,
    reference: str = "",
    actor=None,
    reason: str = "",
) -> tuple[LedgerEntry, bool]:
    """Grant credits that expire CREDIT_EXPIRY_DAYS from now, once per key: (entry, created)."""
    return ledger.grant(
        user_id,
        amount,
        key=key,
        grant_kind=grant_kind,
        campaign_id=campaign_id,
        reference=reference,
        actor=actor,
        reason=reason,
    )


def spend(
    user_id: int | None,
    gpu_seconds: int,
    *,
    gpu_type: str,
    idempotency_key: str,
    reference: str = "",
    group_id: int | None = None,
) -> LedgerEntry | None:
    """Cover up to `gpu_seconds` of `gpu_type` with credits (billing's contract with credits):
    at most the balance, once per key; None when nothing could be covered. `group_id`: from
    the group's credit pool."""
    return ledger.spend(
        user_id,
        gpu_seconds,
        gpu_type=gpu_type,
        idempotency_key=idempotency_key,
        reference=reference,
        group_id=group_id,
    )


def adjust(
    user_id: int | None, amount: int, *, actor, reason: str, key: str, group_id: int | None = None
) -> tuple[LedgerEntry, bool]:
    """An admin's correction with a reason, once per key: (entry, created). `group_id`: the
    group's credit pool."""
    return ledger.adjust(user_id, amount, actor=actor, reason=reason, key=key, group_id=group_id)


def reverse(entry_id: int, *, actor, reason: str) -> LedgerEntry:
    """Undo a grant's remainder or a spend, once per entry."""
    return ledger.reverse(entry_id, actor=actor, reason=reason)


def decide_held_grant(held_id: int, *, approve: bool, actor, note: str = "") -> HeldGrant:
    """Marketing's decision on a held grant (never on one that pays the reviewer); audited."""
    return grants.decide(held_id, approve=approve, actor=actor, note=note)


def create_campaign(actor, values: dict) -> Campaign:
    """A new campaign from already valid terms (campaigns.terms_errors); audited."""
    return campaigns.create_campaign(actor, values)


def approve_campaign(campaign_id: int, actor) -> Campaign:
    """A second marketer's approval of a large campaign budget (campaigns.approve); audited."""
    return campaigns.approve(campaign_id, actor)
