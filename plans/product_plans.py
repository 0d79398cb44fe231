"""The three plans of docs/product.md ("Plans") as data: the seed of the plan catalogue (migration
0002) and, as snapshots, the plans of tests that need no database."""

from __future__ import annotations

from decimal import Decimal
from types import MappingProxyType

from plans.catalog import PlanSnapshot

PRODUCT_PLANS = [
    {
        "code": "free",
        "name": "Free",
        "qos": "free",
        "priority": 1000,
        "monthly_price": Decimal("0.00"),
        "max_job_minutes": 4 * 60,
        "official_images_only": True,
        # 10 hours of RTX 4090 a month, all there is: Slurm enforces it (GrpTRESMins).
        "included_hours_are_a_cap": True,
        "included_nvme_gb": 0,
        "dataset_quota_gb": 0,  # no datasets: its jobs use scratch
        "max_reservation_minutes": 0,  # the free plan may not reserve GPUs
        # Its usage is recorded at the list card's prices (and billed $0: the hours are a cap).
        "rate_card": "list",
        # (GPU type, at once, included hours a month)
        "gpu_types": [("rtx4090", 1, 10)],
    },
    {
        "code": "pro",
        "name": "Pro",
        "qos": "pro",
        "priority": 5000,
        "monthly_price": Decimal("299.00"),
        "max_job_minutes": 24 * 60,
        "official_images_only": False,
        # 100 A100-hours included; use beyond is billed at list prices (the billing issue).
        "included_hours_are_a_cap": False,
        "included_nvme_gb": 500,
        "dataset_quota_gb": 500,
        "max_reservation_minutes": 8 * 60,
        "rate_card": "list",
        "gpu_types": [("rtx4090", 2, 0), ("a100", 2, 100)],
    },
    {
        "code": "enterprise",
        "name": "Enterprise",
        "qos": "premium",
        "priority": 10000,
        "monthly_price": Decimal("0.00"),
        "max_job_minutes": 7 * 24 * 60,
        "official_images_only": False,
        "included_hours_are_a_cap": False,
        "included_nvme_gb": 0,
        # Stores up to a node's whole cache (2 TB, docs/product.md); its jobs pay NVMe GB-hours.
        "dataset_quota_gb": 2000,
        "max_reservation_minutes": 7 * 24 * 60,
        # Pay per second at the enterprise card (A100 $0.0025/s, H100 $0.004/s, and the volume
        # discount tiers; plans/seed.py).
        "rate_card": "enterprise",
        "gpu_types": [("rtx4090", 4, 0), ("a100", 4, 0), ("h100", 2, 0)],
    },
]


def product_plan(base: str, **changes) -> PlanSnapshot:
    """A snapshot of one of the plans above, without the database (`changes` override fields)."""
    spec = next(plan for plan in PRODUCT_PLANS if plan["code"] == base)
    fields = {key: value for key, value in spec.items() if key != "gpu_types"}
    rows = spec["gpu_types"]
    fields["gpu_quota"] = {gpu_type: n for gpu_type, n, _hours in rows}
    fields["included_gpu_hours"] = {gpu_type: hours for gpu_type, _n, hours in rows if hours}
    fields.update(changes)
    for name in ("gpu_quota", "included_gpu_hours"):
        fields[name] = MappingProxyType(dict(fields[name]))
    return PlanSnapshot(**fields)
