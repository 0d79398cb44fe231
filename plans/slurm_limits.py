"""What Slurm must enforce for each plan and each subscriber, as cluster.commands.limits values, and
the comparison with what slurmdbd holds (`manage.py slurm_limits`).

Per plan, one QOS: priority, MaxWall = the plan's longest job, MaxTRESPerUser = the plan's
concurrent GPUs by type (0 for every other known type, so a job naming a type outside the
plan is refused) and the same in shards (a shard job holds part of one GPU), DenyOnLimit.
Per user, the association: the plan's QOS (admins: every plan's), the monthly GPU-minute
budget of a capped plan (free), and a submit hold while the subscription is paused.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.conf import settings

from cluster.commands.limits import AssociationLimits, QosLimits
from plans.catalog import PlanSnapshot, all_qos_names, snapshot
from plans.models import Plan


def qos_limits(plan: PlanSnapshot, gpu_types: dict | None = None) -> QosLimits:
    gpu_types = settings.GPU_TYPES if gpu_types is None else gpu_types
    tres = {}
    for gpu_type in sorted(gpu_types):
        allowed = plan.gpu_quota.get(gpu_type, 0)
        tres[f"gres/gpu:{gpu_type}"] = allowed
        tres[f"gres/shard:{gpu_type}"] = allowed * int(gpu_types[gpu_type]["shards_per_gpu"])
    return QosLimits(
        name=plan.qos,
        priority=plan.priority,
        max_wall_minutes=plan.max_job_minutes,
        max_tres_per_user=tres,
        # Every plan's jobs may take the GPUs spot jobs hold (requeued after their notice).
        preempt=(settings.SPOT_QOS,) if settings.SPOT_QOS else (),
    )


def spot_qos_limits(plans: list[PlanSnapshot]) -> QosLimits:
    """The spot QOS: the lowest priority, preempted by every plan's (requeued, SIGTERM first and
    SPOT_GRACE_SECONDS to checkpoint, never within SPOT_PREEMPT_EXEMPT_SECONDS of its start).
    No GPU count per user: spot soaks up whatever is idle and gives it back on demand. Its
    longest job is the longest of the plans that may run spot."""
    eligible = [plan.max_job_minutes for plan in plans if plan.allows_spot]
    return QosLimits(
        name=settings.SPOT_QOS,
        priority=0,
        max_wall_minutes=max(eligible) if eligible else 60,
        preempt_mode="requeue",
        grace_seconds=settings.SPOT_GRACE_SECONDS,
        preempt_exempt_seconds=settings.SPOT_PREEMPT_EXEMPT_SECONDS,
    )


def all_qos_limits() -> list[QosLimits]:
    """One QOS per plan, and the spot QOS. Two plans may share a QOS only if they agree on its limits."""
    by_name: dict[str, QosLimits] = {}
    plans = [snapshot(plan) for plan in Plan.objects.prefetch_related("gpu_types")]
    if settings.SPOT_QOS:
        # First: sacctmgr refuses a Preempt list naming a QOS that does not exist yet.
        by_name[settings.SPOT_QOS] = spot_qos_limits(plans)
    for plan in plans:
        limits = qos_limits(plan)
        if plan.qos == settings.SPOT_QOS:
            raise ValueError(f"SPOT_QOS {settings.SPOT_QOS} is also plan {plan.code}'s QOS; give spot its own")
        if plan.qos in by_name and by_name[plan.qos] != limits:
            raise ValueError(f"plans sharing QOS {plan.qos} ask for different limits; give each its own QOS")
        by_name[plan.qos] = limits
    return list(by_name.values())


@dataclass(frozen=True)
class AssociationTerms:
    qos: list[str]
    default_qos: str
    gpu_minutes: int | None
    max_submit_jobs: int | None

    def as_kwargs(self) -> dict:
        return {"gpu_minutes": self.gpu_minutes, "max_submit_jobs": self.max_submit_jobs}


def association_terms(plan: PlanSnapshot, *, is_admin: bool) -> AssociationTerms:
    return AssociationTerms(
        qos=all_qos_names() if is_admin else [plan.qos, *([settings.SPOT_QOS] if plan.allows_spot else [])],
        default_qos=plan.qos,
        gpu_minutes=plan.monthly_gpu_minutes_cap,
        # A paused subscription's jobs are refused, by Slurm too.
        max_submit_jobs=0 if plan.is_paused else None,
    )


def association_limits(user_name: str, plan: PlanSnapshot, *, is_admin: bool) -> AssociationLimits:
    terms = association_terms(plan, is_admin=is_admin)
    return AssociationLimits(
        user=user_name,
        account=settings.SLURM_ACCOUNT,
        qos=tuple(sorted(terms.qos)),
        default_qos=terms.default_qos,
        gpu_minutes=terms.gpu_minutes,
        max_submit_jobs=terms.max_submit_jobs,
    )
