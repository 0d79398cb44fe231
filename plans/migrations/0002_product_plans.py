"""Seeds the plan catalogue with the three plans of PRODUCT.md; admins edit them afterwards."""

from django.db import migrations


def seed(apps, schema_editor):
    from plans.product_plans import PRODUCT_PLANS

    Plan = apps.get_model("plans", "Plan")
    PlanGpuType = apps.get_model("plans", "PlanGpuType")
    for spec in PRODUCT_PLANS:
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
