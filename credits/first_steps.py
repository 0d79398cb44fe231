"""A new user's first steps as the dashboard tells them: what verifying their address grants,
and where the tutorial is and what it pays. The amounts are their own campaign's (the
standing one for a user who came without a campaign link), never written into a page; where a
grant would not come (a refused sign-up, a closed campaign) no amount is promised."""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal

from django.urls import reverse

from credits import tutorial
from credits.actions.grants import default_campaign
from credits.models import Enrollment, LedgerEntry
from foundation.emails import verified_addresses


@dataclass(frozen=True)
class FirstSteps:
    verified: bool
    # Credits that verifying the address grants; None where none would come.
    signup_credits: int | None
    signup_paid: bool
    # Credits that a completed tutorial job grants; None where none would come.
    tutorial_credits: int | None
    tutorial_done: bool
    tutorial_paid: bool
    tutorial_url: str  # "" once the tutorial is done
    tutorial_name: str = tutorial.TEMPLATE_NAME
    tutorial_summary: str = tutorial.SUMMARY

    @property
    def pending(self) -> bool:
        """Something is left to do: the dashboard shows the steps until both are done."""
        return not self.verified or not self.tutorial_done

    @property
    def signup_hours(self) -> Decimal | None:
        """The sign-up credits as hours of the GPU a credit is a second of (an RTX 4090)."""
        return None if self.signup_credits is None else Decimal(self.signup_credits) / 3600


def first_steps(user) -> FirstSteps:
    enrollment = Enrollment.objects.select_related("campaign").filter(user_id=user.pk).first()
    campaign = enrollment.campaign if enrollment is not None else default_campaign()
    grants_come = not (enrollment is not None and enrollment.grants_refused) and not campaign.closed_reason()
    paid = set(
        LedgerEntry.objects.filter(idempotency_key__in=(f"signup:{user.pk}", f"tutorial:{user.pk}")).values_list(
            "idempotency_key", flat=True
        )
    )
    tutorial_paid = f"tutorial:{user.pk}" in paid
    tutorial_done = tutorial_paid or bool(enrollment and enrollment.tutorial_done_at)
    # The template the link opens (made again if deleted) while the tutorial is still to do.
    url = "" if tutorial_done else reverse("jobs:new") + f"?template={tutorial.ensure_template(user.pk).pk}"
    return FirstSteps(
        verified=bool(verified_addresses(user)),
        signup_credits=campaign.signup_gpu_seconds if grants_come and campaign.signup_gpu_seconds else None,
        signup_paid=f"signup:{user.pk}" in paid,
        tutorial_credits=campaign.tutorial_gpu_seconds if grants_come and campaign.tutorial_gpu_seconds else None,
        tutorial_done=tutorial_done,
        tutorial_paid=tutorial_paid,
        tutorial_url=url,
    )
