"""The marketing console's figures, from credits' daily rollups (`CampaignDay`), so they cost
the same at a million ledger entries as at a thousand; money at the list price from billing
(console sits above both, so it may read both)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from decimal import Decimal

from django.db.models import Count, Exists, OuterRef, Q, Sum
from django.db.models.functions import TruncDate
from django.utils import timezone

from credits.models import CampaignDay, Enrollment
from foundation.money import to_cents
from jobs.models import Job
from plans.price_list import PricingError
from plans.rates import NoRateCard, rate_card_at

FIGURES = ("signups", "verified", "activated", "granted", "spent", "expired", "reversed")
RETENTION_DEFINITION = (
    "7-day retention: of the people who signed up on a day, the share who ran a job on days 1 to 7 after "
    "signing up (from 24 hours to 8 days after the sign-up). A day's figure is final 8 days after it."
)
RETENTION_DAYS_SHOWN = 60
# Credits are RTX 4090 GPU-seconds: what they would cost at the list price is the liability.
CREDIT_GPU_TYPE = "rtx4090"


def credit_price() -> Decimal | None:
    """USD of one credit at the list card in force, or None without one."""
    try:
        return rate_card_at("list").gpu_price(CREDIT_GPU_TYPE)
    except (NoRateCard, PricingError):
        return None


def dollars(credits: int | None, price: Decimal | None) -> Decimal | None:
    if credits is None or price is None:
        return None
    return to_cents(Decimal(credits) * price)


@dataclass
class Totals:
    signups: int = 0
    verified: int = 0
    activated: int = 0
    granted: int = 0
    spent: int = 0
    expired: int = 0
    reversed: int = 0

    @property
    def outstanding(self) -> int:
        return self.granted - self.spent - self.expired - self.reversed

    @property
    def granted_per_activated(self) -> int | None:
        return self.granted // self.activated if self.activated else None


def totals_by_campaign() -> dict[int, Totals]:
    rows = CampaignDay.objects.values("campaign_id").annotate(**{name: Sum(name) for name in FIGURES})
    return {row.pop("campaign_id"): Totals(**{name: row[name] or 0 for name in FIGURES}) for row in rows}


def totals_of(campaign_id: int) -> Totals:
    row = CampaignDay.objects.filter(campaign_id=campaign_id).aggregate(**{name: Sum(name) for name in FIGURES})
    return Totals(**{name: row[name] or 0 for name in FIGURES})


def per_day(campaign_id: int | None = None, days: int = 90) -> list[dict]:
    since = timezone.localdate() - timedelta(days=days - 1)
    rows = CampaignDay.objects.filter(day__gte=since)
    if campaign_id is not None:
        rows = rows.filter(campaign_id=campaign_id)
    return list(rows.values("day").annotate(**{name: Sum(name) for name in FIGURES}).order_by("day"))


def retention(campaign_id: int) -> list[dict]:
    """Per sign-up day (the last RETENTION_DAYS_SHOWN): sign-ups, retained, share, final or not."""
    now = timezone.now()
    since = now - timedelta(days=RETENTION_DAYS_SHOWN)
    ran_in_week = Job.objects.filter(
        owner_id=OuterRef("user_id"),
        created_at__gte=OuterRef("signed_up_at") + timedelta(days=1),
        created_at__lt=OuterRef("signed_up_at") + timedelta(days=8),
    )
    rows = (
        Enrollment.objects.filter(campaign_id=campaign_id, signed_up_at__gte=since)
        .annotate(day=TruncDate("signed_up_at"), retained=Exists(ran_in_week))
        .values("day")
        .annotate(signups=Count("pk"), kept=Count("pk", filter=Q(retained=True)))
        .order_by("day")
    )
    result = []
    for row in rows:
        final = row["day"] + timedelta(days=9) <= timezone.localdate(now)
        share = Decimal(row["kept"] * 100) / row["signups"]
        result.append({**row, "share": share.quantize(Decimal("0.1")), "final": final})
    return result


def members(campaign_id: int, limit: int = 200) -> list[dict]:
    """The campaign's sign-ups by username (marketing sees names, never jobs or invoices)."""
    return list(
        Enrollment.objects.filter(campaign_id=campaign_id)
        .order_by("-signed_up_at", "-id")
        .values(
            "user__username", "referrer__username", "signed_up_at", "verified_at", "activated_at",
            "review_reason", "grants_refused", "referral_refused",
        )[:limit]
    )  # fmt: skip
