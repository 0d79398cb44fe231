"""The one read path for plans: `plan_for(user)` -> a frozen snapshot of the user's plan
and subscription, which callers may keep and pass around without touching the database."""

from __future__ import annotations

from dataclasses import dataclass, field
from decimal import Decimal
from types import MappingProxyType

from django.conf import settings

from plans.models import Plan, Subscription, fee_in_force


@dataclass(frozen=True)
class PlanSnapshot:
    code: str
    name: str
    qos: str
    priority: int
    monthly_price: Decimal
    max_job_minutes: int
    official_images_only: bool
    # GPUs by type a user may hold or queue at once; a type missing may not be used.
    gpu_quota: MappingProxyType = field(default_factory=lambda: MappingProxyType({}))
    included_gpu_hours: MappingProxyType = field(default_factory=lambda: MappingProxyType({}))
    # The code of the rate card its usage is priced at (plans.rates.rates_for_plan).
    rate_card: str = "list"
    included_hours_are_a_cap: bool = False
    included_nvme_gb: int = 0
    dataset_quota_gb: int = 0
    max_reservation_minutes: int = 0
    session_idle_minutes: int = 30
    right_sizing: str = "advise"
    # The subscription's state: a paused plan's jobs are refused (docs/product.md, Pro).
    status: str = Subscription.Status.ACTIVE

    @property
    def monthly_gpu_hours(self) -> int | None:
        """The month's GPU-hours when they are a hard cap (free), else None."""
        return sum(self.included_gpu_hours.values()) if self.included_hours_are_a_cap else None

    @property
    def monthly_gpu_minutes_cap(self) -> int | None:
        hours = self.monthly_gpu_hours
        return None if hours is None else hours * 60

    @property
    def allows_spot(self) -> bool:
        """Spot jobs (preemptible, priced by time window: plans/spot.py) are for plans that pay
        for what they use: a capped free plan would run them outside its cap."""
        return bool(settings.SPOT_QOS) and not self.included_hours_are_a_cap

    @property
    def is_paused(self) -> bool:
        return self.status == Subscription.Status.PAUSED


def snapshot(plan: Plan, status: str = Subscription.Status.ACTIVE) -> PlanSnapshot:
    rows = list(plan.gpu_types.all())
    return PlanSnapshot(
        code=plan.code,
        name=plan.name,
        qos=plan.qos,
        priority=plan.priority,
        monthly_price=plan.monthly_price,
        max_job_minutes=plan.max_job_minutes,
        official_images_only=plan.official_images_only,
        gpu_quota=MappingProxyType({row.gpu_type: row.max_concurrent for row in rows}),
        included_gpu_hours=MappingProxyType({row.gpu_type: row.included_hours for row in rows if row.included_hours}),
        rate_card=plan.rate_card,
        included_hours_are_a_cap=plan.included_hours_are_a_cap,
        included_nvme_gb=plan.included_nvme_gb,
        dataset_quota_gb=plan.dataset_quota_gb,
        max_reservation_minutes=plan.max_reservation_minutes,
        session_idle_minutes=plan.session_idle_minutes,
        right_sizing=plan.right_sizing,
        status=status,
    )


def current_subscription(user) -> Subscription | None:
    return (
        Subscription.objects.filter(user=user, ended_at__isnull=True)
        .select_related("plan")
        .prefetch_related("plan__gpu_types")
        .first()
    )


def plan_for(user) -> PlanSnapshot:
    """The user's current plan. Without a subscription (a user made before plans, or by a
    script) it is the default plan, which is what sign-up subscribes to."""
    subscription = current_subscription(user)
    if subscription is not None and subscription.status != Subscription.Status.CANCELLED:
        return snapshot(subscription.plan, subscription.status)
    return snapshot(default_plan())


def subscription_history(user_id: int) -> list[Subscription]:
    """Every subscription the user held, oldest first, with its plan's GPU terms (two queries)."""
    return list(
        Subscription.objects.filter(user_id=user_id)
        .select_related("plan")
        .prefetch_related("plan__gpu_types")
        .order_by("started_at", "id")
    )


def held_at(history: list[Subscription], moment) -> Subscription | None:
    """The subscription of `history` (oldest first) held at `moment`: started at or before it
    and not ended by then. A moment before the whole history (a run older than the account's
    plan rows: an account made before plans, usage imported later) takes the newest row, as
    pricing did before plans had a history; None without any history."""
    held = [row for row in history if row.started_at <= moment and (row.ended_at is None or row.ended_at > moment)]
    if held:
        return held[-1]
    return history[-1] if history and moment < history[0].started_at else None


def plan_held_at(user_id: int, moment, history: list[Subscription] | None = None) -> PlanSnapshot:
    """The plan the user held at `moment`: what a run that started then is priced by, so a
    plan changed while it ran (Enterprise to Free, say) never makes it cheaper. Without any
    subscription, the default plan (as `plan_for`)."""
    row = held_at(history if history is not None else subscription_history(user_id), moment)
    if row is None:
        return snapshot(default_plan())
    return snapshot(row.plan, row.status)


class PlansHeld:
    """`plan_held_at` for many users and moments (a metering pass, a page of running jobs),
    each user's subscription history read once."""

    def __init__(self):
        self._histories: dict[int, list[Subscription]] = {}

    def at(self, user_id: int, moment) -> PlanSnapshot:
        if user_id not in self._histories:
            self._histories[user_id] = subscription_history(user_id)
        return plan_held_at(user_id, moment, self._histories[user_id])


def plans_to_price(held: PlansHeld, user_id: int, queued_at, started_at) -> list[PlanSnapshot]:
    """The plans a run of the user's may be priced by: the plan held at its start and, when it
    waited from an earlier moment (the portal took the job, an admin approved the reservation),
    the plan held then. Billing prices by the dearer (billing/charge_split.py, `dearest`)."""
    at_start = held.at(user_id, started_at)
    if queued_at is None or queued_at >= started_at:
        return [at_start]
    queued = held.at(user_id, queued_at)
    return [at_start] if queued.code == at_start.code else [at_start, queued]


def monthly_price_for(code: str, period) -> Decimal:
    """The plan's fee for the billing month starting `period` (PlanPrice: a change is billed
    from the month after it was made)."""
    price = (
        Plan.objects.filter(code=code)
        .annotate(fee=fee_in_force(period, plan_ref="pk"))
        .values_list("fee", flat=True)
        .first()
    )
    return price if price is not None else Decimal(0)


def plan_by_code(code: str) -> PlanSnapshot:
    return snapshot(Plan.objects.prefetch_related("gpu_types").get(code=code))


def default_plan() -> Plan:
    return Plan.objects.prefetch_related("gpu_types").get(code=settings.DEFAULT_PLAN)


def all_qos_names() -> list[str]:
    """Every plan's QOS and the spot QOS (admins may submit with any)."""
    spot = {settings.SPOT_QOS} if settings.SPOT_QOS else set()
    return sorted(set(Plan.objects.values_list("qos", flat=True)) | spot)
