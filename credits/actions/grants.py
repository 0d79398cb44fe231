"""The three grants (docs/product.md, "Credits"), each at most once per user by its key:

- sign-up (`signup:<user>`): once the e-mail address is verified;
- tutorial (`tutorial:<user>`): once the user's tutorial job is COMPLETED with exit code 0 and
  their address is verified;
- referral (`referral:invitee:<user>`, `referral:inviter:<user>`): to both sides once the
  invitee's first job is COMPLETED with exit code 0 (and their address is verified).

`settle(user_id)` grants whatever the user's enrollment has earned and not yet received; the
signals call it and a beat task sweeps, so a missed signal is repaired and a repeated one
grants nothing. A grant comes from the user's campaign, at its amounts, while it is open and
within its budget (checked under the campaign's row lock); one held for review waits in
`HeldGrant` until marketing approves or rejects it, never by the person it pays.

One mailbox, one account's grants: verifying an address claims its mailbox (`MailboxClaim`,
every spelling of it: +tags, Gmail's dots); an account that signs up with, or later verifies,
an address of a mailbox another account claimed earns nothing more.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import UTC, datetime

from django.contrib.auth import get_user_model
from django.db import transaction
from django.utils import timezone

from audit.log import record
from credits import fraud
from credits.actions import ledger
from credits.models import (
    DEFAULT_CAMPAIGN_CODE,
    DEFAULT_CAMPAIGN_NAME,
    Campaign,
    Enrollment,
    GrantKind,
    HeldGrant,
    LedgerEntry,
    MailboxClaim,
)
from credits.tutorial import is_tutorial_job
from jobs.models import JobState

log = logging.getLogger(__name__)


def default_campaign() -> Campaign:
    campaign, _ = Campaign.objects.get_or_create(
        code=DEFAULT_CAMPAIGN_CODE,
        defaults={"name": DEFAULT_CAMPAIGN_NAME, "start": datetime(2020, 1, 1, tzinfo=UTC)},
    )
    return campaign


@dataclass(frozen=True)
class Outcome:
    kind: str
    status: str  # granted, already, held, refused
    detail: str = ""


def enroll(
    user, *, campaign: Campaign | None = None, referrer=None, ip: str | None = None, browser_id: str = ""
) -> Enrollment:
    """Record how a user signed up and which rules apply to them (once; later calls return it)."""
    existing = Enrollment.objects.filter(user=user).first()
    if existing is not None:
        return existing
    campaign = campaign or default_campaign()
    normalised = fraud.normalise_email(user.email) if user.email else ""
    grants_refused = referral_refused = review_reason = ""
    if user.email and fraud.is_disposable(user.email):
        grants_refused = "disposable e-mail domain"
    elif normalised and MailboxClaim.objects.filter(mailbox=normalised).exclude(user=user).exists():
        grants_refused = MAILBOX_TAKEN
    if referrer is not None:
        referral_refused = fraud.self_referral_reason(user, referrer)
        if not referral_refused:
            review_reason = fraud.shared_place_reason(referrer.pk, ip, browser_id)
    with transaction.atomic():
        enrollment = Enrollment.objects.create(
            user=user,
            campaign=campaign,
            referrer=referrer,
            referral_refused=referral_refused,
            grants_refused=grants_refused,
            review_reason=review_reason,
            normalised_email=normalised,
            signup_ip=ip or None,
            browser_id=browser_id,
            signed_up_at=user.date_joined or timezone.now(),
        )
        ledger.bump_campaign_day(campaign.pk, enrollment.signed_up_at, signups=1)
    return enrollment


def enrollment_of(user_id: int) -> Enrollment:
    enrollment = Enrollment.objects.select_related("campaign").filter(user_id=user_id).first()
    if enrollment is None:
        # Accounts made before credits, or by an admin: the standing campaign, no referrer.
        enroll(get_user_model().objects.get(pk=user_id))
        enrollment = Enrollment.objects.select_related("campaign").get(user_id=user_id)
    return enrollment


def _mark(user_id: int, field: str, figure: str) -> bool:
    """Set a milestone once (a conditional UPDATE) and count it for the campaign's day."""
    now = timezone.now()
    with transaction.atomic():
        changed = Enrollment.objects.filter(user_id=user_id, **{f"{field}__isnull": True}).update(**{field: now})
        if changed:
            campaign_id = Enrollment.objects.filter(user_id=user_id).values_list("campaign_id", flat=True).get()
            ledger.bump_campaign_day(campaign_id, now, **{figure: 1})
    return bool(changed)


MAILBOX_TAKEN = "another account already uses this mailbox"


def email_verified(user_id: int, email: str | None = None) -> None:
    """The user confirmed `email` (default: their primary address): its mailbox is theirs
    unless another account claimed it first, in which case their grants stop here."""
    enrollment_of(user_id)
    if email is None:
        email = get_user_model().objects.filter(pk=user_id).values_list("email", flat=True).get()
    mailbox = fraud.normalise_email(email) if email else ""
    if mailbox:
        claim, _ = MailboxClaim.objects.get_or_create(mailbox=mailbox, defaults={"user_id": user_id})
        if claim.user_id != user_id:
            Enrollment.objects.filter(user_id=user_id, grants_refused="").update(grants_refused=MAILBOX_TAKEN)
            log.info("credits for user %s: %s is another account's mailbox", user_id, mailbox)
    _mark(user_id, "verified_at", "verified")
    settle(user_id)


def job_finished(job) -> None:
    """A job's row changed (jobs.signals.job_changed): completions count, by the mirror's word."""
    if job.owner_id is None or job.state != JobState.COMPLETED or job.exit_code != 0:
        return
    enrollment_of(job.owner_id)
    _mark(job.owner_id, "activated_at", "activated")
    if is_tutorial_job(job):
        Enrollment.objects.filter(user_id=job.owner_id, tutorial_done_at__isnull=True).update(
            tutorial_done_at=timezone.now()
        )
    settle(job.owner_id)


def _already(key: str) -> bool:
    return (
        LedgerEntry.objects.filter(idempotency_key=key).exists()
        or HeldGrant.objects.filter(idempotency_key=key).exists()
    )


def _referrals_received(referrer_id: int, campaign_id: int) -> int:
    granted = LedgerEntry.objects.filter(
        account__user_id=referrer_id, campaign_id=campaign_id, grant_kind=GrantKind.REFERRAL_INVITER, kind="grant"
    ).count()
    waiting = HeldGrant.objects.filter(
        user_id=referrer_id, campaign_id=campaign_id, grant_kind=GrantKind.REFERRAL_INVITER
    ).exclude(state=HeldGrant.State.REJECTED)
    return granted + waiting.count()


def _campaign_grant(
    user_id: int,
    campaign_id: int,
    kind: str,
    amount: int,
    key: str,
    *,
    reference: str = "",
    review: str = "",
    cap_referrer: bool = False,
) -> Outcome:
    if amount == 0:
        return Outcome(kind, "refused", "the campaign grants nothing for this")
    with transaction.atomic():
        campaign = Campaign.objects.select_for_update().get(pk=campaign_id)
        if _already(key):
            return Outcome(kind, "already")
        closed = campaign.closed_reason()
        if closed:
            return Outcome(kind, "refused", closed)
        left = campaign.budget_left()
        if left is not None and left < amount:
            return Outcome(kind, "refused", "the campaign's budget cannot cover this grant")
        if cap_referrer and campaign.per_referrer_cap is not None:
            if _referrals_received(user_id, campaign_id) >= campaign.per_referrer_cap:
                return Outcome(
                    kind, "refused", f"the referrer has reached the campaign's cap of {campaign.per_referrer_cap}"
                )
        if review:
            HeldGrant.objects.create(
                user_id=user_id, campaign=campaign, grant_kind=kind, amount=amount, idempotency_key=key,
                reference=reference, reason=review,
            )  # fmt: skip
            return Outcome(kind, "held", review)
        ledger.grant(user_id, amount, key=key, grant_kind=kind, campaign_id=campaign_id, reference=reference)
        Campaign.objects.filter(pk=campaign_id).update(granted_gpu_seconds=campaign.granted_gpu_seconds + amount)
        return Outcome(kind, "granted")


def settle(user_id: int) -> list[Outcome]:
    """Grant what the user has earned and not received (idempotent)."""
    enrollment = enrollment_of(user_id)
    if enrollment.grants_refused:
        return [Outcome("all", "refused", enrollment.grants_refused)]
    campaign = enrollment.campaign
    outcomes = []
    if enrollment.verified_at:
        outcomes.append(
            _campaign_grant(user_id, campaign.pk, GrantKind.SIGNUP, campaign.signup_gpu_seconds, f"signup:{user_id}")
        )
    if enrollment.tutorial_done_at and enrollment.verified_at:
        outcomes.append(
            _campaign_grant(
                user_id, campaign.pk, GrantKind.TUTORIAL, campaign.tutorial_gpu_seconds, f"tutorial:{user_id}"
            )
        )
    referrer_id = enrollment.referrer_id
    if enrollment.activated_at and enrollment.verified_at and referrer_id and not enrollment.referral_refused:
        reference = f"invitee:{user_id}"
        outcomes.append(
            _campaign_grant(
                user_id, campaign.pk, GrantKind.REFERRAL_INVITEE, campaign.referral_gpu_seconds,
                f"referral:invitee:{user_id}", reference=reference, review=enrollment.review_reason,
            )
        )  # fmt: skip
        outcomes.append(
            _campaign_grant(
                referrer_id, campaign.pk, GrantKind.REFERRAL_INVITER, campaign.referral_gpu_seconds,
                f"referral:inviter:{user_id}", reference=reference, review=enrollment.review_reason, cap_referrer=True,
            )
        )  # fmt: skip
    for outcome in outcomes:
        if outcome.status == "refused":
            log.info("credits for user %s: %s refused (%s)", user_id, outcome.kind, outcome.detail)
    return outcomes


class ReviewError(ValueError):
    pass


def _parties(held: HeldGrant) -> set[int]:
    """Who a held grant pays, and the other side of its referral (reference "invitee:<id>";
    the invitee's enrollment names the referrer)."""
    parties = {held.user_id}
    if held.reference.startswith("invitee:"):
        invitee_id = int(held.reference.split(":", 1)[1])
        parties.add(invitee_id)
        referrer_id = Enrollment.objects.filter(user_id=invitee_id).values_list("referrer_id", flat=True).first()
        if referrer_id:
            parties.add(referrer_id)
    return parties


def decide(held_id: int, *, approve: bool, actor, note: str = "") -> HeldGrant:
    """Marketing's decision on a held grant: approval grants it (within the campaign's budget;
    the campaign's end does not stop a grant earned before it), rejection grants nothing.
    Audited either way; a decided grant is not decided again."""
    with transaction.atomic():
        held = HeldGrant.objects.select_for_update().select_related("campaign").get(pk=held_id)
        if held.state != HeldGrant.State.PENDING:
            raise ReviewError(f"this grant was already {held.get_state_display().lower()}")
        if actor is not None and actor.pk in _parties(held):
            raise ReviewError("this grant pays you or your own referral: another reviewer decides it")
        if approve:
            campaign = Campaign.objects.select_for_update().get(pk=held.campaign_id)
            left = campaign.budget_left()
            if left is not None and left < held.amount:
                raise ReviewError("the campaign's budget cannot cover this grant any more; reject it")
            ledger.grant(
                held.user_id,
                held.amount,
                key=held.idempotency_key,
                grant_kind=held.grant_kind,
                campaign_id=held.campaign_id,
                reference=held.reference,
                actor=actor,
                # The customer sees this entry: the reviewer's note stays on the held grant and
                # in the audit log.
                reason="approved on review",
            )
            Campaign.objects.filter(pk=campaign.pk).update(
                granted_gpu_seconds=campaign.granted_gpu_seconds + held.amount
            )
        state = HeldGrant.State.APPROVED if approve else HeldGrant.State.REJECTED
        HeldGrant.objects.filter(pk=held.pk, state=HeldGrant.State.PENDING).update(
            state=state, decided_by=actor, decided_at=timezone.now(), decision_note=note[:500]
        )
        record(
            actor,
            "credits.held_grant." + ("approve" if approve else "reject"),
            f"held grant {held.pk} ({held.grant_kind}, user {held.user_id}, campaign {held.campaign.code})",
            before={"state": held.state},
            after={"state": state, "amount": held.amount},
            reason=note,
        )
        held.refresh_from_db()
        return held
