"""Credits listen to accounts (sign-up, e-mail verification, sign-in) and jobs (a finished job)."""

from __future__ import annotations

import logging

from allauth.account.signals import email_confirmed, user_signed_up
from django.conf import settings
from django.contrib.auth.signals import user_logged_in
from django.db.models.signals import post_save
from django.dispatch import receiver

from credits import fraud, tutorial
from credits.actions import grants, ledger
from credits.middleware import browser_id
from credits.models import Campaign
from foundation.ratelimit import client_ip
from jobs.signals import job_changed

log = logging.getLogger(__name__)

# Where the landing page (/r/<code>) leaves the campaign and referrer for the sign-up.
SESSION_CAMPAIGN = "credits_campaign"
SESSION_REFERRER = "credits_referrer"


@receiver(post_save, sender=settings.AUTH_USER_MODEL)
def give_new_user_tutorial_and_account(sender, instance, created, raw=False, **kwargs):
    if created and not raw:
        tutorial.ensure_template(instance.pk)
        ledger.account_for(instance.pk)


def request_address(request) -> str | None:
    address = client_ip(request) if request is not None else None
    return address if address and address != "unknown" else None


@receiver(user_signed_up)
def enroll_new_user(sender, request, user, **kwargs):
    campaign = referrer = None
    if request is not None:
        code = request.session.get(SESSION_CAMPAIGN)
        campaign = Campaign.objects.filter(code=code).first() if code else None
        referral_code = request.session.get(SESSION_REFERRER)
        if referral_code:
            account = (
                ledger.CreditAccount.objects.select_related("user")
                .filter(referral_code=referral_code, user__isnull=False)
                .first()
            )
            referrer = account.user if account else None
    ip, browser = request_address(request), browser_id(request) if request is not None else ""
    grants.enroll(user, campaign=campaign, referrer=referrer, ip=ip, browser_id=browser)
    fraud.record_sighting(user.pk, ip, browser)


@receiver(email_confirmed)
def grant_on_verification(sender, request, email_address, **kwargs):
    grants.email_verified(email_address.user_id, email_address.email)


@receiver(user_logged_in)
def remember_where_user_signed_in(sender, request, user, **kwargs):
    if request is not None:
        fraud.record_sighting(user.pk, request_address(request), browser_id(request))


@receiver(job_changed)
def grant_for_finished_job(sender, job, **kwargs):
    grants.job_finished(job)
