"""Seeds the list and enterprise rate cards (PRODUCT.md, with documented placeholders where it
names no price: plans/seed.py); admins add later cards."""

from django.db import migrations


def seed(apps, schema_editor):
    from plans.seed import seed_rate_cards

    seed_rate_cards(apps.get_model("billing", "RateCard"), apps.get_model("billing", "RateCardGpuPrice"))


class Migration(migrations.Migration):
    dependencies = [("billing", "0001_rate_cards")]
    operations = [migrations.RunPython(seed, migrations.RunPython.noop)]
