"""The rate cards are the catalogue's now (plans migration 0005 took them over, tables and rows
unchanged): usage records point at plans.RateCard, and billing forgets its own models. Nothing
in the database changes: the foreign key already points at the same table."""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("billing", "0007_reserved_time_source"),
        ("plans", "0005_rate_cards_move"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AlterField(
                    model_name="usagerecord",
                    name="rate_card",
                    field=models.ForeignKey(
                        blank=True,
                        null=True,
                        on_delete=django.db.models.deletion.PROTECT,
                        related_name="usage_records",
                        to="plans.ratecard",
                    ),
                ),
                migrations.DeleteModel(name="RateCardGpuPrice"),
                migrations.DeleteModel(name="RateCard"),
            ],
            database_operations=[],
        ),
    ]
