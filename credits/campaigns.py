"""Creating a campaign (the marketing console's form and the API both call this)."""

from __future__ import annotations

from django.db import transaction

from audit.log import record
from credits.models import Campaign

FIELDS = (
    "name", "code", "start", "end", "signup_gpu_seconds", "tutorial_gpu_seconds", "referral_gpu_seconds",
    "budget_gpu_seconds", "per_referrer_cap",
)  # fmt: skip


def create_campaign(actor, values: dict) -> Campaign:
    """`values` are already valid (a form's or a serializer's cleaned data); audited."""
    with transaction.atomic():
        campaign = Campaign.objects.create(
            created_by=actor, **{name: values[name] for name in FIELDS if name in values}
        )
        record(
            actor,
            "credits.campaign.create",
            f"campaign {campaign.code}",
            after={name: str(getattr(campaign, name)) for name in FIELDS},
        )
    return campaign
