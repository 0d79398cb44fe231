"""Credits (docs/product.md, "Credits"): GPU-seconds of an RTX 4090, kept in an append-only ledger.

- `LedgerEntry` is the ledger: rows are only ever inserted (the model refuses save() on an
  existing row and delete(); on PostgreSQL a trigger refuses UPDATE and DELETE). A user's
  balance is the sum of their entries' amounts.
- `CreditAccount` is the row a user's ledger writes lock (so a spend never takes more than
  is there), with the balance cached under that lock (credits/tests prove it equals the sum).
- `CreditLot` is derived, mutable book-keeping: what is left of each credit, so spends take
  the credit that expires first and the marketing figures know which campaign's credit was
  spent or expired. The ledger is the truth; lots can be rebuilt from it.
- `Campaign`, `Enrollment` (who signed up through which campaign and referrer), `HeldGrant`
  (the review queue), `Sighting` (where a user was seen, for the fraud rules) and
  `CampaignDay` (daily figures, kept as the ledger is written, so the marketing pages cost
  the same at a million entries as at a thousand).
"""

from __future__ import annotations

import secrets
from decimal import Decimal

from django.conf import settings
from django.core.validators import MinValueValidator, RegexValidator
from django.db import models
from django.utils import timezone

# docs/product.md's amounts, the defaults of every campaign.
DEFAULT_SIGNUP_GPU_SECONDS = 5_000
DEFAULT_TUTORIAL_GPU_SECONDS = 10_000
DEFAULT_REFERRAL_GPU_SECONDS = 5_000
DEFAULT_CAMPAIGN_CODE = "welcome"
# Its name as people read it (the referral page's heading, the ledger): the campaign of everyone
# who signed up without a campaign's link.
DEFAULT_CAMPAIGN_NAME = "Welcome credits"


class LedgerIsAppendOnly(Exception):
    pass


class EntryKind(models.TextChoices):
    GRANT = "grant", "Grant"
    SPEND = "spend", "Spend"
    EXPIRY = "expiry", "Expiry"
    ADJUSTMENT = "adjustment", "Adjustment"
    REVERSAL = "reversal", "Reversal"


class GrantKind(models.TextChoices):
    # Said to the people who get them (the credits page, marketing's review): words, not codes.
    SIGNUP = "signup", "Sign-up credits"
    TUTORIAL = "tutorial", "Tutorial reward"
    REFERRAL_INVITER = "referral_inviter", "For inviting a friend"
    REFERRAL_INVITEE = "referral_invitee", "For joining through a friend"


class BurnWeight(models.Model):
    """Credits one GPU-second of a type burns, from a moment on. A change is a new row (the
    newest row not after a moment is in force), so a past spend's weight stays explainable."""

    gpu_type = models.CharField(max_length=32)
    credits_per_gpu_second = models.DecimalField(
        max_digits=12, decimal_places=6, validators=[MinValueValidator(Decimal("0.000001"))]
    )
    effective_from = models.DateTimeField(default=timezone.now)
    note = models.CharField(max_length=200, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["gpu_type", "effective_from"], name="one_weight_per_type_and_moment"),
            models.CheckConstraint(condition=models.Q(credits_per_gpu_second__gt=0), name="weight_positive"),
        ]
        ordering = ["gpu_type", "-effective_from"]

    def __str__(self):
        return f"{self.gpu_type}: {self.credits_per_gpu_second} credits/GPU-s from {self.effective_from:%Y-%m-%d}"


def new_referral_code() -> str:
    return secrets.token_urlsafe(9)


class CreditAccount(models.Model):
    # The owner: a user, or a group's credit pool (spent on the runs the group pays for).
    user = models.OneToOneField(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.CASCADE, related_name="credit_account"
    )
    group = models.OneToOneField(
        "groups.Group", null=True, blank=True, on_delete=models.CASCADE, related_name="credit_account"
    )
    # Kept equal to the sum of the account's entries by credits.actions.ledger (the only writer),
    # always under this row's lock.
    balance = models.BigIntegerField(default=0)
    referral_code = models.CharField(max_length=32, unique=True, default=new_referral_code)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.CheckConstraint(condition=models.Q(balance__gte=0), name="credit_balance_not_negative"),
            models.CheckConstraint(
                condition=models.Q(user__isnull=False, group__isnull=True)
                | models.Q(user__isnull=True, group__isnull=False),
                name="credit_account_has_one_owner",
            ),
        ]

    def __str__(self):
        owner = f"group {self.group_id}" if self.group_id else f"user {self.user_id}"
        return f"credits of {owner}: {self.balance}"


class LedgerEntry(models.Model):
    account = models.ForeignKey(CreditAccount, on_delete=models.PROTECT, related_name="entries")
    kind = models.CharField(max_length=16, choices=EntryKind.choices)
    # Signed, in credits (RTX 4090 GPU-seconds): grants positive, spends and expiries negative.
    amount = models.BigIntegerField()
    idempotency_key = models.CharField(max_length=200, unique=True)
    created_at = models.DateTimeField(default=timezone.now)
    expires_at = models.DateTimeField(null=True, blank=True)
    grant_kind = models.CharField(max_length=24, choices=GrantKind.choices, blank=True)
    campaign = models.ForeignKey("Campaign", null=True, blank=True, on_delete=models.PROTECT, related_name="entries")
    # Spends: what was asked to be covered, and what these credits covered.
    gpu_type = models.CharField(max_length=32, blank=True)
    gpu_seconds = models.BigIntegerField(null=True, blank=True)
    covered_gpu_seconds = models.BigIntegerField(null=True, blank=True)
    credits_per_gpu_second = models.DecimalField(max_digits=12, decimal_places=6, null=True, blank=True)
    # What the entry is for, e.g. "job:<uuid>" (billing's reference) or the invitee's id.
    reference = models.CharField(max_length=200, blank=True)
    reverses = models.OneToOneField("self", null=True, blank=True, on_delete=models.PROTECT, related_name="reversed_by")
    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    reason = models.CharField(max_length=500, blank=True)

    class Meta:
        indexes = [
            models.Index(fields=["account", "-created_at", "-id"]),
            models.Index(fields=["reference"]),
        ]
        constraints = [
            models.CheckConstraint(condition=~models.Q(amount=0), name="ledger_amount_not_zero"),
        ]

    def __str__(self):
        return f"{self.kind} {self.amount:+d} ({self.idempotency_key})"

    def save(self, *args, **kwargs):
        if self.pk is not None and not self._state.adding:
            raise LedgerIsAppendOnly("Ledger entries are never changed; write a reversal or an adjustment.")
        super().save(*args, **kwargs)

    def delete(self, *args, **kwargs):
        raise LedgerIsAppendOnly("Ledger entries are never deleted; write a reversal or an adjustment.")


class CreditLot(models.Model):
    """What is left of one credit-giving entry (a grant, a positive adjustment)."""

    account = models.ForeignKey(CreditAccount, on_delete=models.CASCADE, related_name="lots")
    entry = models.OneToOneField(LedgerEntry, on_delete=models.PROTECT, related_name="lot")
    campaign = models.ForeignKey("Campaign", null=True, blank=True, on_delete=models.PROTECT, related_name="+")
    expires_at = models.DateTimeField(null=True, blank=True)
    remaining = models.BigIntegerField()

    class Meta:
        indexes = [
            models.Index(fields=["account", "expires_at"], condition=models.Q(remaining__gt=0), name="open_lots"),
            models.Index(fields=["expires_at"], condition=models.Q(remaining__gt=0), name="open_lots_by_expiry"),
        ]
        constraints = [models.CheckConstraint(condition=models.Q(remaining__gte=0), name="lot_not_negative")]

    def __str__(self):
        return f"lot of entry {self.entry_id}: {self.remaining} left"


code_validator = RegexValidator(r"^[a-z0-9][a-z0-9-]{1,38}[a-z0-9]$", "3-40 lowercase letters, digits or dashes")


class Campaign(models.Model):
    name = models.CharField(max_length=100)
    code = models.CharField(max_length=40, unique=True, validators=[code_validator])
    start = models.DateTimeField()
    end = models.DateTimeField(null=True, blank=True)
    signup_gpu_seconds = models.PositiveIntegerField(default=DEFAULT_SIGNUP_GPU_SECONDS)
    tutorial_gpu_seconds = models.PositiveIntegerField(default=DEFAULT_TUTORIAL_GPU_SECONDS)
    referral_gpu_seconds = models.PositiveIntegerField(default=DEFAULT_REFERRAL_GPU_SECONDS)
    # None: no limit (the standing "welcome" campaign).
    budget_gpu_seconds = models.PositiveBigIntegerField(null=True, blank=True)
    # The most referral grants one referrer receives in this campaign; None: no cap.
    per_referrer_cap = models.PositiveIntegerField(null=True, blank=True)
    # Everything this campaign has granted, kept under the campaign's row lock with each grant.
    granted_gpu_seconds = models.BigIntegerField(default=0)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    # A budget above CAMPAIGN_APPROVAL_GPU_SECONDS grants nothing until a second marketer (not its
    # creator) approves it (credits/actions/campaigns.py).
    needs_approval = models.BooleanField(default=False)
    approved_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    approved_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-start", "-id"]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(end__isnull=True) | models.Q(end__gt=models.F("start")),
                name="campaign_ends_after_start",
            ),
        ]

    def __str__(self):
        return f"{self.name} ({self.code})"

    def closed_reason(self, moment=None) -> str:
        """Why the campaign grants nothing now, or "" while it does."""
        moment = moment or timezone.now()
        if self.needs_approval and self.approved_at is None:
            return "This campaign waits for a second marketer's approval of its budget; it grants nothing yet."
        if moment < self.start:
            return f"This campaign starts on {self.start:%Y-%m-%d %H:%M %Z}."
        if self.end is not None and moment >= self.end:
            return f"This campaign ended on {self.end:%Y-%m-%d %H:%M %Z}; it grants no more credits."
        if self.budget_gpu_seconds is not None and self.granted_gpu_seconds >= self.budget_gpu_seconds:
            return "This campaign's credit budget is spent; it grants no more credits."
        return ""

    def budget_left(self) -> int | None:
        if self.budget_gpu_seconds is None:
            return None
        return max(0, self.budget_gpu_seconds - self.granted_gpu_seconds)


class Enrollment(models.Model):
    """How a user came: the campaign and referrer of their sign-up, and how far they got."""

    user = models.OneToOneField(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="credit_enrollment")
    campaign = models.ForeignKey(Campaign, on_delete=models.PROTECT, related_name="enrollments")
    referrer = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="referrals"
    )
    # Why a referral earns nothing (self-referral), or "".
    referral_refused = models.CharField(max_length=200, blank=True)
    # Why every grant is refused (a disposable domain, a mailbox already granted), or "".
    grants_refused = models.CharField(max_length=200, blank=True)
    # Why referral grants wait for marketing (same address or browser as the referrer), or "".
    review_reason = models.CharField(max_length=200, blank=True)
    normalised_email = models.CharField(max_length=254, blank=True, db_index=True)
    signup_ip = models.GenericIPAddressField(null=True, blank=True)
    browser_id = models.CharField(max_length=64, blank=True)
    signed_up_at = models.DateTimeField(default=timezone.now)
    verified_at = models.DateTimeField(null=True, blank=True)
    activated_at = models.DateTimeField(null=True, blank=True)
    tutorial_done_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        indexes = [models.Index(fields=["campaign", "signed_up_at"])]

    def __str__(self):
        return f"user {self.user_id} in campaign {self.campaign_id}"


class HeldGrant(models.Model):
    class State(models.TextChoices):
        PENDING = "pending", "Waiting for review"
        APPROVED = "approved", "Approved"
        REJECTED = "rejected", "Rejected"

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="held_grants")
    campaign = models.ForeignKey(Campaign, on_delete=models.PROTECT, related_name="held_grants")
    grant_kind = models.CharField(max_length=24, choices=GrantKind.choices)
    amount = models.PositiveIntegerField()
    idempotency_key = models.CharField(max_length=200, unique=True)
    reference = models.CharField(max_length=200, blank=True)
    reason = models.CharField(max_length=200)
    state = models.CharField(max_length=16, choices=State.choices, default=State.PENDING)
    decided_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    decided_at = models.DateTimeField(null=True, blank=True)
    decision_note = models.CharField(max_length=500, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["created_at", "id"]
        indexes = [models.Index(fields=["state", "created_at"])]

    def __str__(self):
        return f"held {self.grant_kind} of {self.amount} for user {self.user_id} ({self.state})"


class MailboxClaim(models.Model):
    """A mailbox (credits.fraud.normalise_email: no +tag, no ignored dots) and the first account
    that verified an address of it: grants go to one account per mailbox, whichever of its
    spellings each account signed up or verified with. Claimed on verification only, so an
    address typed at sign-up and never confirmed takes nothing from its real owner."""

    mailbox = models.CharField(max_length=254, unique=True)
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    claimed_at = models.DateTimeField(default=timezone.now)

    def __str__(self):
        return f"{self.mailbox} -> user {self.user_id}"


class Sighting(models.Model):
    """A user seen from an address and a browser (sign-up, sign-in); one row per pair."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    ip = models.GenericIPAddressField(null=True, blank=True)
    browser_id = models.CharField(max_length=64, blank=True)
    last_seen = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["user", "ip", "browser_id"], name="one_sighting_per_place")]
        indexes = [models.Index(fields=["user", "last_seen"])]

    def __str__(self):
        return f"user {self.user_id} at {self.ip} / {self.browser_id[:6]}"


class CampaignDay(models.Model):
    """One campaign's figures for one day, added to as things happen (never recounted)."""

    campaign = models.ForeignKey(Campaign, on_delete=models.CASCADE, related_name="days")
    day = models.DateField()
    signups = models.PositiveIntegerField(default=0)
    verified = models.PositiveIntegerField(default=0)
    activated = models.PositiveIntegerField(default=0)
    granted = models.BigIntegerField(default=0)
    spent = models.BigIntegerField(default=0)
    expired = models.BigIntegerField(default=0)
    reversed = models.BigIntegerField(default=0)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["campaign", "day"], name="one_row_per_campaign_day")]
        ordering = ["day"]

    def __str__(self):
        return f"campaign {self.campaign_id} on {self.day}"
