"""Subscription plans and what each maps to in Slurm (PRODUCT.md, "Plans").

Prices and metering come with the billing issue; here a plan decides the Slurm QOS a
user's jobs run under and their concurrent GPU quota.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Plan:
    code: str
    name: str
    qos: str
    # Concurrent GPUs by type; a type missing from the map may not be used.
    gpu_quota: dict[str, int] = field(default_factory=dict)
    monthly_gpu_hours: int | None = None
    official_images_only: bool = False


PLANS: dict[str, Plan] = {
    "free": Plan("free", "Free", qos="free", gpu_quota={"rtx4090": 1}, monthly_gpu_hours=10, official_images_only=True),
    "pro": Plan("pro", "Pro", qos="pro", gpu_quota={"rtx4090": 2, "a100": 2}),
    "enterprise": Plan("enterprise", "Enterprise", qos="premium", gpu_quota={"rtx4090": 4, "a100": 4, "h100": 2}),
}
PLAN_CHOICES = [(plan.code, plan.name) for plan in PLANS.values()]
ALL_QOS = sorted({plan.qos for plan in PLANS.values()})


def plan_for(code: str) -> Plan:
    return PLANS[code]
