"""Seeds the plan catalogue with the three plans of PRODUCT.md; admins edit them afterwards.

The data is frozen here as it was when this migration was written (Enterprise's per-second GPU
prices were then on its GPU rows): migration 0006 moves those prices onto the rate card, so a
new database and an old one end the same way. plans/seed.py seeds today's shape for the tests."""

from decimal import Decimal

from django.db import migrations

PLANS = [
    {
        "code": "free",
        "name": "Free",
        "qos": "free",
        "priority": 1000,
        "monthly_price": Decimal("0.00"),
        "max_job_minutes": 4 * 60,
        "official_images_only": True,
        "included_hours_are_a_cap": True,
        "included_nvme_gb": 0,
        # (GPU type, at once, included hours a month, price per second)
        "gpu_types": [("rtx4090", 1, 10, None)],
    },
    {
        "code": "pro",
        "name": "Pro",
        "qos": "pro",
        "priority": 5000,
        "monthly_price": Decimal("299.00"),
        "max_job_minutes": 24 * 60,
        "official_images_only": False,
        "included_hours_are_a_cap": False,
        "included_nvme_gb": 500,
        "gpu_types": [("rtx4090", 2, 0, None), ("a100", 2, 100, None)],
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
        "gpu_types": [("rtx4090", 4, 0, None), ("a100", 4, 0, Decimal("0.0025")), ("h100", 2, 0, Decimal("0.004"))],
    },
]


def seed(apps, schema_editor):
    Plan = apps.get_model("plans", "Plan")
    PlanGpuType = apps.get_model("plans", "PlanGpuType")
    for spec in PLANS:
        fields = {key: value for key, value in spec.items() if key not in {"code", "gpu_types"}}
        plan, created = Plan.objects.get_or_create(code=spec["code"], defaults=fields)
        if not created:
            continue
        for gpu_type, concurrent, hours, rate in spec["gpu_types"]:
            PlanGpuType.objects.create(
                plan=plan, gpu_type=gpu_type, max_concurrent=concurrent, included_hours=hours, rate_per_second=rate
            )


class Migration(migrations.Migration):
    dependencies = [("plans", "0001_initial")]
    operations = [migrations.RunPython(seed, migrations.RunPython.noop)]
