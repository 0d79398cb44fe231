"""Creating a campaign (the marketing console's form and the API both call this)."""

from __future__ import annotations

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from audit.log import record
from credits.models import Campaign

FIELDS = (
    "name", "code", "start", "end", "signup_gpu_seconds", "tutorial_gpu_seconds", "referral_gpu_seconds",
    "budget_gpu_seconds", "per_referrer_cap",
)  # fmt: skip


GRANT_FIELDS = ("signup_gpu_seconds", "tutorial_gpu_seconds", "referral_gpu_seconds")


def terms_errors(values: dict) -> dict[str, str]:
    """What is wrong with a new campaign's terms, by field ({} when nothing is). Every campaign
    a marketer makes has a budget and a per-referrer cap, each bounded (CAMPAIGN_BUDGET_MAX_GPU_SECONDS,
    CAMPAIGN_REFERRER_CAP_MAX), and no grant above CAMPAIGN_GRANT_MAX_GPU_SECONDS: a typo cannot
    hand out credit without bound (the standing welcome campaign, made by the code, is the one
    without a budget)."""
    errors = {}
    most = settings.CAMPAIGN_GRANT_MAX_GPU_SECONDS
    for name in GRANT_FIELDS:
        if values.get(name) is not None and values[name] > most:
            errors[name] = f"at most {most:,} credits a grant"
    if not values.get("budget_gpu_seconds"):
        errors["budget_gpu_seconds"] = "a campaign needs a budget (credits it may grant in all)"
    elif values["budget_gpu_seconds"] > settings.CAMPAIGN_BUDGET_MAX_GPU_SECONDS:
        errors["budget_gpu_seconds"] = f"at most {settings.CAMPAIGN_BUDGET_MAX_GPU_SECONDS:,} credits a campaign"
    if not values.get("per_referrer_cap"):
        errors["per_referrer_cap"] = "a campaign needs a cap on the referral grants one referrer receives"
    elif values["per_referrer_cap"] > settings.CAMPAIGN_REFERRER_CAP_MAX:
        errors["per_referrer_cap"] = f"at most {settings.CAMPAIGN_REFERRER_CAP_MAX:,} referral grants a referrer"
    return errors


def create_campaign(actor, values: dict) -> Campaign:
    """`values` are already valid (a form's or a serializer's cleaned data); audited. A budget
    above CAMPAIGN_APPROVAL_GPU_SECONDS waits for a second marketer's approval (`approve`)."""
    budget = values.get("budget_gpu_seconds") or 0
    with transaction.atomic():
        campaign = Campaign.objects.create(
            created_by=actor,
            needs_approval=budget > settings.CAMPAIGN_APPROVAL_GPU_SECONDS,
            **{name: values[name] for name in FIELDS if name in values},
        )
        record(
            actor,
            "credits.campaign.create",
            f"campaign {campaign.code}",
            after={name: str(getattr(campaign, name)) for name in FIELDS},
        )
    return campaign


class ApprovalRefused(Exception):
    pass


def approve(campaign_id: int, actor) -> Campaign:
    """A second marketer approves a campaign whose budget needs it: never its creator (four eyes
    on a large liability), once (a conditional UPDATE); audited. ApprovalRefused says why not."""
    campaign = Campaign.objects.get(pk=campaign_id)
    if not campaign.needs_approval or campaign.approved_at is not None:
        raise ApprovalRefused("This campaign needs no approval, or has it already.")
    if campaign.created_by_id == getattr(actor, "pk", None):
        raise ApprovalRefused("A campaign's budget is approved by another marketer than the one who made it.")
    with transaction.atomic():
        done = Campaign.objects.filter(pk=campaign.pk, approved_at__isnull=True).update(
            approved_by=actor, approved_at=timezone.now()
        )
        if not done:
            raise ApprovalRefused("This campaign was approved a moment ago.")
        record(actor, "credits.campaign.approve", f"campaign {campaign.code}",
               after={"budget_gpu_seconds": campaign.budget_gpu_seconds})  # fmt: skip
    campaign.refresh_from_db()
    return campaign
