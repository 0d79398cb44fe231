"""The path every new job takes, from the API and from the form alike."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django.conf import settings

from accounts.models import Profile
from billing.plans import plan_for
from gpupool.ratelimit import client_ip, hit
from jobs import actions
from jobs.models import Job
from jobs.spec import SpecPolicy, parse_job_spec


class RateLimited(Exception):
    def __init__(self, retry_after: int):
        super().__init__(f"Too many submissions; try again in {retry_after} s.")
        self.retry_after = retry_after


def accept(request, data: Mapping[str, Any]) -> Job:
    """Rate limit, validate, check quota and record the job. Raises RateLimited, SpecError,
    QuotaExceeded or NotProvisioned, having changed nothing."""
    decision = hit("submit", client_ip(request), limit=settings.SUBMIT_RATE_LIMIT_PER_MINUTE)
    if not decision.allowed:
        raise RateLimited(decision.retry_after)
    profile = Profile.objects.get(user=request.user)
    spec = parse_job_spec(data, plan=plan_for(profile.plan), policy=SpecPolicy.from_settings())
    return actions.submit(request.user, spec)
