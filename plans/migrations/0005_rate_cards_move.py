"""The rate cards move from billing to the catalogue (plans/rate_cards.py) so the plan pages, a
lower layer than billing, can show their prices. Only Django's idea of the models moves: the
tables keep their names (billing_ratecard, billing_ratecardgpuprice) and their rows, and
billing migration 0008 lets go of them. The content types follow, so admins' permissions on
rate cards stay theirs."""

import django.core.validators
import django.db.models.deletion
import django.utils.timezone
from django.conf import settings
from django.db import migrations, models

SLUG = django.core.validators.RegexValidator(
    "^[a-z][a-z0-9_-]{0,31}\\Z", "lower-case letters, digits, - and _ (at most 32)"
)
PRICE = {"decimal_places": 8, "max_digits": 14, "validators": [django.core.validators.MinValueValidator(0)]}
MODELS = ("ratecard", "ratecardgpuprice")


def move_content_types(apps, schema_editor):
    ContentType = apps.get_model("contenttypes", "ContentType")
    for model in MODELS:
        if not ContentType.objects.filter(app_label="plans", model=model).exists():
            ContentType.objects.filter(app_label="billing", model=model).update(app_label="plans")


def return_content_types(apps, schema_editor):
    ContentType = apps.get_model("contenttypes", "ContentType")
    for model in MODELS:
        if not ContentType.objects.filter(app_label="billing", model=model).exists():
            ContentType.objects.filter(app_label="plans", model=model).update(app_label="billing")


class Migration(migrations.Migration):
    dependencies = [
        ("plans", "0004_plan_prices"),
        # The tables exist and hold the seeded cards.
        ("billing", "0007_reserved_time_source"),
        ("contenttypes", "0002_remove_content_type_name"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.CreateModel(
                    name="RateCard",
                    fields=[
                        ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                        ("name", models.CharField(max_length=64)),
                        (
                            "code",
                            models.CharField(
                                help_text='Which price list this is, e.g. "list" or "enterprise"',
                                max_length=32,
                                validators=[SLUG],
                            ),
                        ),
                        (
                            "effective_from",
                            models.DateTimeField(
                                help_text="From when these prices apply. Not in the past: a change of price is a new "
                                "card with a later date, and a card in force can no longer be edited."
                            ),
                        ),
                        ("note", models.TextField(blank=True, help_text="Why these prices (placeholders say so here)")),
                        (
                            "gpu_memory_price_per_gb_second",
                            models.DecimalField(help_text="USD per GB-second of GPU memory (the article: 0.00002)", **PRICE),
                        ),
                        (
                            "nvme_price_per_gb_hour",
                            models.DecimalField(help_text="USD per GB-hour of NVMe cache (the article: 0.02)", **PRICE),
                        ),
                        ("created_at", models.DateTimeField(default=django.utils.timezone.now, editable=False)),
                        (
                            "created_by",
                            models.ForeignKey(
                                blank=True,
                                null=True,
                                on_delete=django.db.models.deletion.SET_NULL,
                                related_name="+",
                                to=settings.AUTH_USER_MODEL,
                            ),
                        ),
                    ],
                    options={
                        "db_table": "billing_ratecard",
                        "ordering": ["code", "-effective_from"],
                        "constraints": [
                            models.UniqueConstraint(fields=("code", "effective_from"), name="one_card_per_code_and_moment")
                        ],
                    },
                ),
                migrations.CreateModel(
                    name="RateCardGpuPrice",
                    fields=[
                        ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                        ("gpu_type", models.CharField(max_length=32, validators=[SLUG])),
                        ("price_per_gpu_second", models.DecimalField(help_text="USD per GPU-second", **PRICE)),
                        (
                            "card",
                            models.ForeignKey(
                                on_delete=django.db.models.deletion.CASCADE,
                                related_name="gpu_prices",
                                to="plans.ratecard",
                            ),
                        ),
                    ],
                    options={
                        "db_table": "billing_ratecardgpuprice",
                        "ordering": ["card", "gpu_type"],
                        "constraints": [
                            models.UniqueConstraint(fields=("card", "gpu_type"), name="one_price_per_card_and_gpu_type")
                        ],
                    },
                ),
            ],
            database_operations=[],
        ),
        migrations.RunPython(move_content_types, return_content_types),
    ]
