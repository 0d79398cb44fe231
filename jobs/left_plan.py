"""Work queued under a plan its owner has left for a lesser one.

A job waits in Slurm under the QOS of the plan it was submitted under, and would start later
at that plan's priority (on every cluster: a further cluster's job, a sweep's tasks, a job
waiting to move). Charging prices a run by the dearer of the plan at submission and at its start
(billing/actions/charging.py), so nobody pays less than they used; but a user who leaves a paid plan
did not ask to keep paying for work they queued before. So when the new plan ranks below the
old one (a lower QOS priority), the work still waiting under the old plan's QOS is cancelled,
each job says why, and the owner gets one e-mail listing it. Running work is never touched.
Jobs charged to a group that pays for them are the group's and stay. Upgrades change nothing:
the work runs at its own QOS and is priced at the dearer plan.
"""

from __future__ import annotations

import logging

from celery import shared_task
from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.mail import send_mail
from django.db import transaction

from cluster.errors import RETRY_WHILE_SLURM_IS_AWAY
from foundation.enqueue import delay_or_run
from foundation.words import counted
from groups.group_plans import paying_groups
from jobs import actions as job_actions
from jobs.models import Job, JobState
from plans.catalog import plan_by_code

log = logging.getLogger(__name__)
WAITING = (JobState.SUBMITTING, JobState.PENDING)


def is_downgrade(before, after, status: str = "active") -> bool:
    """`after` ranks below `before` (a lower QOS priority), or the subscription is no longer
    active (paused, cancelled); the same QOS is no change to the work waiting under it."""
    return before.qos != after.qos and (after.priority < before.priority or status != "active")


def waiting_under(user_id: int, qos: str):
    return (
        Job.objects.filter(owner_id=user_id, qos=qos, state__in=WAITING)
        .exclude(group__in=paying_groups())
        .order_by("pk")
    )


def cancel_waiting_work(user_id: int, left_qos: str, left_name: str, new_name: str) -> tuple[list[int], list[str]]:
    """Cancel the user's jobs waiting under `left_qos` (see the module). Returns the ids of the
    jobs cancelled and the refusals that left a job waiting (said on the job). Raises
    SlurmTransientError for the caller's task to retry: a job cancelled once stays so."""
    reason = (
        f"Cancelled while it waited: it was queued under your {left_name} plan, which you left for {new_name}. "
        "Submit it again to run it under your plan now."
    )
    cancelled, refused = [], []
    for job in waiting_under(user_id, left_qos):
        try:
            job_actions.cancel(job)
        except job_actions.CancelRefused as exc:
            refused.append(f"job {job.pk}: {exc}")
            continue
        Job.objects.filter(pk=job.pk).update(error=reason)
        cancelled.append(job.pk)
    return cancelled, refused


def tell_owner(user, job_ids: list[int], left_name: str, new_name: str) -> None:
    if not job_ids or not user.email:
        return
    names = ", ".join(
        f"{name or 'job'} (#{pk})" for pk, name in Job.objects.filter(pk__in=job_ids).values_list("pk", "name")[:50]
    )
    more = f" and {len(job_ids) - 50} more" if len(job_ids) > 50 else ""

    def send():
        try:
            send_mail(
                "GPU pool: your waiting jobs were cancelled with your plan change",
                f"You left the {left_name} plan for {new_name}. {counted(len(job_ids), 'job')} queued under "
                f"{left_name} had "
                f"not started and were cancelled, so they do not run (and bill) at {left_name}'s terms:\n"
                f"{names}{more}.\nRunning jobs were not touched. Submit them again to run under {new_name}.\n",
                settings.DEFAULT_FROM_EMAIL,
                [user.email],
            )
        except Exception:
            log.exception("the plan change e-mail to user %s failed", user.pk)

    transaction.on_commit(send)


def on_plan_change(user_id: int, before: str | None, after: str, status: str) -> None:
    """The receiver's work (jobs/receivers.py): a downgrade's waiting work, on a worker."""
    if before is None:
        return
    left, now = plan_by_code(before), plan_by_code(after)
    if is_downgrade(left, now, status):
        delay_or_run(cancel_work_of_left_plan, user_id, left.qos, left.name, now.name)


# Here, not in jobs.tasks (this module imports jobs.actions, which imports jobs.tasks): registered
# through CELERY_IMPORTS (gpupool/settings.py).
@shared_task(max_retries=12, **RETRY_WHILE_SLURM_IS_AWAY)
def cancel_work_of_left_plan(user_id: int, left_qos: str, left_name: str, new_name: str) -> str:
    """The user's work still waiting under a plan they left for a lesser one (see the module)."""
    cancelled, refused = cancel_waiting_work(user_id, left_qos, left_name, new_name)
    tell_owner(get_user_model().objects.get(pk=user_id), cancelled, left_name, new_name)
    return f"cancelled {len(cancelled)}" + (f", left {len(refused)}: {'; '.join(refused)[:500]}" if refused else "")
