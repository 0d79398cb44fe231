"""Seeds the plan catalogue with the three plans of PRODUCT.md; admins edit them afterwards."""

from django.db import migrations


def seed(apps, schema_editor):
    from plans.seed import seed_product_plans

    seed_product_plans(apps.get_model("plans", "Plan"), apps.get_model("plans", "PlanGpuType"))


class Migration(migrations.Migration):
    dependencies = [("plans", "0001_initial")]
    operations = [migrations.RunPython(seed, migrations.RunPython.noop)]
