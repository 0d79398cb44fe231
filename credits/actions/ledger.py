"""The one writer of the credit ledger.

Every write locks the user's `CreditAccount` row first (SELECT ... FOR UPDATE), so writes to
one balance happen one at a time: a spend reads the balance under the lock and takes at most
that, and the cached balance moves with each entry in the same transaction. Every entry has
an idempotency key (unique): writing a key again returns the entry it already wrote.

Credit is used earliest expiry first (`CreditLot`): a spend takes from the lot that expires
soonest, and what is left of a lot when it expires becomes an expiry entry. Lots remember
their campaign, so spent, expired and outstanding credit add up per campaign (`CampaignDay`).
"""

from __future__ import annotations

from datetime import timedelta

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import F, Q, Sum
from django.utils import timezone

from credits import weights
from credits.models import CampaignDay, CreditAccount, CreditLot, EntryKind, LedgerEntry
from groups.queries import owned_by


class LedgerError(ValueError):
    """A write the ledger refuses; nothing was written."""


def account_for(user_id: int | None, *, group_id: int | None = None) -> CreditAccount:
    lookup = owned_by(user_id, group_id)
    account = CreditAccount.objects.filter(**lookup).first()
    if account is not None:
        return account
    try:
        with transaction.atomic():
            return CreditAccount.objects.create(**lookup)
    except IntegrityError:
        # Created by a concurrent first write (or a referral code collided: that one retries).
        return CreditAccount.objects.get(**lookup)


def _locked_account(user_id: int | None, *, group_id: int | None = None) -> CreditAccount:
    account_for(user_id, group_id=group_id)
    return CreditAccount.objects.select_for_update().get(**owned_by(user_id, group_id))


def _existing(key: str, account: CreditAccount) -> LedgerEntry | None:
    entry = LedgerEntry.objects.filter(idempotency_key=key).first()
    if entry is not None and entry.account_id != account.pk:
        raise LedgerError(f"idempotency key {key!r} belongs to another account")
    return entry


def balance(user_id: int | None, *, group_id: int | None = None) -> int:
    return CreditAccount.objects.filter(**owned_by(user_id, group_id)).values_list("balance", flat=True).first() or 0


def spendable_balance(user_id: int | None, now=None, *, group_id: int | None = None) -> int:
    """What a spend could take now: the balance less the credit past its expiry that the beat
    task has not written off yet (a spend writes it off first). One read of the lots, which hold
    the balance between them (every write keeps them so), locking nothing: quotes and the
    balance a user sees."""
    live = Q(expires_at__isnull=True) | Q(expires_at__gt=now or timezone.now())
    of_owner = owned_by(user_id, group_id, through="account")
    total = CreditLot.objects.filter(live, remaining__gt=0, **of_owner).aggregate(total=Sum("remaining"))
    return total["total"] or 0


def sum_of_entries(user_id: int | None, *, group_id: int | None = None) -> int:
    """The balance as the ledger says it; `balance` must always equal it."""
    of_owner = owned_by(user_id, group_id, through="account")
    return LedgerEntry.objects.filter(**of_owner).aggregate(total=Sum("amount"))["total"] or 0


def bump_campaign_day(campaign_id: int | None, moment, **deltas: int) -> None:
    if campaign_id is None or not any(deltas.values()):
        return
    day = timezone.localdate(moment)
    CampaignDay.objects.get_or_create(campaign_id=campaign_id, day=day)
    CampaignDay.objects.filter(campaign_id=campaign_id, day=day).update(
        **{name: F(name) + value for name, value in deltas.items()}
    )


def _append(account: CreditAccount, kind: str, amount: int, key: str, **fields) -> LedgerEntry:
    """Insert one entry and move the cached balance with it (the account is locked)."""
    if amount == 0:
        raise LedgerError("an entry moves at least one credit")
    if account.balance + amount < 0:
        raise LedgerError(f"the balance is {account.balance}; it cannot go below zero")
    entry = LedgerEntry.objects.create(account=account, kind=kind, amount=amount, idempotency_key=key, **fields)
    CreditAccount.objects.filter(pk=account.pk).update(balance=F("balance") + amount)
    account.balance += amount
    return entry


def _consume(account: CreditAccount, credits: int, moment, figure: str) -> None:
    """Take `credits` from the account's lots, earliest expiry first; count it per campaign
    as `figure` (spent, reversed)."""
    lots = CreditLot.objects.filter(account=account, remaining__gt=0).order_by(
        F("expires_at").asc(nulls_last=True), "id"
    )
    left = credits
    for lot in lots.iterator(chunk_size=100):
        if left == 0:
            break
        take = min(lot.remaining, left)
        CreditLot.objects.filter(pk=lot.pk).update(remaining=F("remaining") - take)
        bump_campaign_day(lot.campaign_id, moment, **{figure: take})
        left -= take
    if left:
        # The lots are derived from the ledger and the balance was checked: a mismatch is a bug.
        raise LedgerError(f"the account's lots hold {credits - left} of the {credits} credits its balance says")


def _expire_due(account: CreditAccount, now) -> list[LedgerEntry]:
    written = []
    due = CreditLot.objects.filter(account=account, remaining__gt=0, expires_at__lte=now).select_related("entry")
    for lot in due:
        written.append(
            _append(
                account,
                EntryKind.EXPIRY,
                -lot.remaining,
                f"expiry:lot:{lot.pk}",
                created_at=now,
                campaign_id=lot.campaign_id,
                reference=f"entry:{lot.entry_id}",
            )
        )
        bump_campaign_day(lot.campaign_id, now, expired=lot.remaining)
        CreditLot.objects.filter(pk=lot.pk).update(remaining=0)
    return written


def has_due_expiry(user_id: int, now=None) -> bool:
    """Whether any of the user's credit is past its expiry and not written off (reads only)."""
    return CreditLot.objects.filter(
        account__user_id=user_id, remaining__gt=0, expires_at__lte=now or timezone.now()
    ).exists()


def expire_due(user_id: int, now=None) -> list[LedgerEntry]:
    """Write the expiry entries of the user's credit whose time has come (idempotent: a lot
    expires once)."""
    with transaction.atomic():
        return _expire_due(_locked_account(user_id), now or timezone.now())


def default_expiry(moment):
    return moment + timedelta(days=settings.CREDIT_EXPIRY_DAYS)


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
    """Grant credits that expire CREDIT_EXPIRY_DAYS from now. Returns (entry, created)."""
    if amount <= 0:
        raise LedgerError("a grant is a positive number of credits")
    with transaction.atomic():
        account = _locked_account(user_id)
        existing = _existing(key, account)
        if existing is not None:
            return existing, False
        now = timezone.now()
        entry = _append(
            account,
            EntryKind.GRANT,
            amount,
            key,
            created_at=now,
            expires_at=default_expiry(now),
            grant_kind=grant_kind,
            campaign_id=campaign_id,
            reference=reference,
            actor=actor if getattr(actor, "pk", None) else None,
            reason=reason,
        )
        CreditLot.objects.create(
            account=account, entry=entry, campaign_id=campaign_id, expires_at=entry.expires_at, remaining=amount
        )
        bump_campaign_day(campaign_id, now, granted=amount)
        return entry, True


def job_reference(job_uuid) -> str:
    """The `reference` that ties a spend to a job (the job page lists spends by it)."""
    return f"job:{job_uuid}"


def spend(
    user_id: int | None,
    gpu_seconds: int,
    *,
    gpu_type: str,
    idempotency_key: str,
    reference: str = "",
    group_id: int | None = None,
) -> LedgerEntry | None:
    """Cover up to `gpu_seconds` of `gpu_type` with credits (the contract with billing).

    Takes at most the balance, under the account's lock; one entry per idempotency key (a
    retry returns the entry already written). The entry's `covered_gpu_seconds` is what the
    credits paid for; billing charges money for the rest. None when the balance covers not
    one GPU-second of that type (a balance of 0 included). Raises NoBurnWeight for a GPU type
    without a weight, LedgerError for a negative quantity. `reference` (optional) names what
    was paid for: `job_reference(job.uuid)` shows the spend on that job's page. `group_id`:
    spend from that group's credit pool instead of the user's account."""
    if isinstance(gpu_seconds, bool) or not isinstance(gpu_seconds, int) or gpu_seconds < 0:
        raise LedgerError("gpu_seconds must be a whole number, 0 or more")
    with transaction.atomic():
        account = _locked_account(user_id, group_id=group_id)
        existing = _existing(idempotency_key, account)
        if existing is not None:
            return existing
        now = timezone.now()
        # Credit past its expiry is gone even when the beat task has not written it off yet.
        _expire_due(account, now)
        if gpu_seconds == 0 or account.balance == 0:
            return None
        weight = weights.weight_for(gpu_type, now)
        taken = weights.burn(gpu_seconds, weight, account.balance)
        if taken.credits == 0:
            return None
        entry = _append(
            account,
            EntryKind.SPEND,
            -taken.credits,
            idempotency_key,
            created_at=now,
            gpu_type=gpu_type,
            gpu_seconds=gpu_seconds,
            covered_gpu_seconds=taken.covered_gpu_seconds,
            credits_per_gpu_second=weight,
            reference=reference[:200] or idempotency_key[:200],
        )
        _consume(account, taken.credits, now, "spent")
        return entry


def adjust(
    user_id: int | None, amount: int, *, actor, reason: str, key: str, group_id: int | None = None
) -> tuple[LedgerEntry, bool]:
    """An admin's correction, with a reason: positive adds credit that does not expire,
    negative takes credit back (never below zero). `group_id`: the group's credit pool (how
    an admin fills it)."""
    if not reason.strip():
        raise LedgerError("an adjustment needs a reason")
    with transaction.atomic():
        account = _locked_account(user_id, group_id=group_id)
        existing = _existing(key, account)
        if existing is not None:
            return existing, False
        now = timezone.now()
        _expire_due(account, now)
        entry = _append(account, EntryKind.ADJUSTMENT, amount, key, created_at=now, actor=actor, reason=reason)
        if amount > 0:
            CreditLot.objects.create(account=account, entry=entry, remaining=amount)
        else:
            _consume(account, -amount, now, "reversed")
        return entry, True


def reverse(entry_id: int, *, actor, reason: str) -> LedgerEntry:
    """Undo a grant (what is left of it) or a spend (its credits come back, to expire like a
    new grant). A reversed entry cannot be reversed again (one reversal per entry)."""
    if not reason.strip():
        raise LedgerError("a reversal needs a reason")
    original = LedgerEntry.objects.select_related("account").get(pk=entry_id)
    with transaction.atomic():
        account = _locked_account(original.account.user_id, group_id=original.account.group_id)
        key = f"reversal:{original.pk}"
        existing = _existing(key, account)
        if existing is not None:
            return existing
        now = timezone.now()
        _expire_due(account, now)
        if original.kind == EntryKind.GRANT:
            lot = CreditLot.objects.get(entry=original)
            if lot.remaining == 0:
                raise LedgerError("nothing is left of this grant to take back")
            entry = _append(
                account, EntryKind.REVERSAL, -lot.remaining, key, created_at=now, reverses=original,
                campaign_id=original.campaign_id, actor=actor, reason=reason,
            )  # fmt: skip
            bump_campaign_day(lot.campaign_id, now, reversed=lot.remaining)
            CreditLot.objects.filter(pk=lot.pk).update(remaining=0)
            return entry
        if original.kind == EntryKind.SPEND:
            entry = _append(
                account, EntryKind.REVERSAL, -original.amount, key, created_at=now, expires_at=default_expiry(now),
                reverses=original, reference=original.reference, actor=actor, reason=reason,
            )  # fmt: skip
            CreditLot.objects.create(account=account, entry=entry, expires_at=entry.expires_at, remaining=entry.amount)
            return entry
        raise LedgerError(f"a {original.kind} entry cannot be reversed; write an adjustment")
