"""The path every new job takes, from the API and from the form alike."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django.conf import settings

from foundation.ratelimit import client_ip, hit, refund
from jobs import actions
from jobs.models import Job
from jobs.right_size import standing_shrink
from jobs.submission.datasets import resolve_mounts, with_dataset_nvme
from jobs.submission.spec import SpecPolicy, parse_job_spec
from plans.catalog import plan_for


class RateLimited(Exception):
    def __init__(self, retry_after: int):
        super().__init__(f"Too many submissions; try again in {retry_after} s.")
        self.retry_after = retry_after


def accept(request, data: Mapping[str, Any]) -> Job:
    """Validate, rate limit, check quota and record the job. Raises SpecError, RateLimited,
    QuotaExceeded or NotProvisioned, having changed nothing.

    The limit keys on the user (behind a proxy every user shares one address) and, more
    loosely, on the address (one address with many accounts). Only submissions that pass
    validation count, and one refused for quota gives its count back."""
    data = dict(data)
    # Where the job runs is not part of its spec (a clone runs wherever its new form says).
    reservation_id = data.pop("reservation", None)
    # Who pays is not part of it either: a group's id, null for oneself, absent for the default.
    group_id = data.pop("group", actions.DEFAULT_GROUP)
    # Nor which cluster: a name, `any` (the earliest expected start) or absent (the portal's own).
    cluster = data.pop("cluster", None)
    # Nor whether the user insists on the whole GPU their plan would right-size (jobs/right_size.py).
    keep_whole_gpu = data.pop("keep_whole_gpu", None) in (True, "on", "true", "1")
    plan = plan_for(request.user)
    policy = SpecPolicy.from_settings()
    spec = parse_job_spec(data, plan=plan, policy=policy)
    right_sized: dict = {}
    if not keep_whole_gpu and reservation_id in (None, ""):
        shrink = standing_shrink(request.user, spec, plan)
        if shrink is not None:
            spec, right_sized = shrink.spec, shrink.record
    mounts = resolve_mounts(request.user, spec)
    spec = with_dataset_nvme(spec, mounts, policy)
    counted = count_submission(request)
    try:
        return actions.submit(
            request.user,
            spec,
            reservation_id=reservation_id,
            group_id=group_id,
            plan=plan,
            mounts=mounts,
            cluster=cluster,
            right_sized=right_sized,
        )
    except Exception:
        for scope, key in counted:
            refund(scope, key)
        raise


def count_submission(request) -> list[tuple[str, str]]:
    limits = [
        ("submit-user", str(request.user.pk), settings.SUBMIT_RATE_LIMIT_PER_MINUTE),
        ("submit-ip", client_ip(request), settings.SUBMIT_RATE_LIMIT_PER_IP_PER_MINUTE),
    ]
    counted = []
    for scope, key, limit in limits:
        decision = hit(scope, key, limit=limit)
        counted.append((scope, key))
        if not decision.allowed:
            for earlier_scope, earlier_key in counted:
                refund(earlier_scope, earlier_key)  # a refused request uses up nothing
            raise RateLimited(decision.retry_after)
    return counted
