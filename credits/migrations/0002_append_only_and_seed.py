"""The ledger refuses UPDATE and DELETE in PostgreSQL itself (the model refuses them
everywhere), and the seed: burn weights, the standing campaign, and for users who exist
already a credit account and the tutorial template."""

import secrets
from datetime import UTC, datetime
from decimal import Decimal

from django.db import migrations

APPEND_ONLY = """
CREATE OR REPLACE FUNCTION credits_ledger_append_only() RETURNS trigger AS $$
BEGIN
    RAISE EXCEPTION USING MESSAGE = 'credits_ledgerentry is append-only: ' || TG_OP || ' refused';
END;
$$ LANGUAGE plpgsql;
CREATE TRIGGER credits_ledger_append_only
    BEFORE UPDATE OR DELETE ON credits_ledgerentry
    FOR EACH ROW EXECUTE FUNCTION credits_ledger_append_only();
"""
DROP_APPEND_ONLY = """
DROP TRIGGER IF EXISTS credits_ledger_append_only ON credits_ledgerentry;
DROP FUNCTION IF EXISTS credits_ledger_append_only();
"""
# Copied from credits.weights.SEED_WEIGHTS (a migration keeps its own copy); the tutorial's
# spec is text, read from credits.tutorial.
SEED_WEIGHTS = {"rtx4090": Decimal("1"), "a100": Decimal("3.125"), "h100": Decimal("5")}
SINCE = datetime(2020, 1, 1, tzinfo=UTC)


def append_only(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(APPEND_ONLY)


def drop_append_only(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(DROP_APPEND_ONLY)


def seed(apps, schema_editor):
    from credits.tutorial import TEMPLATE_NAME, TUTORIAL_SPEC

    BurnWeight = apps.get_model("credits", "BurnWeight")
    Campaign = apps.get_model("credits", "Campaign")
    CreditAccount = apps.get_model("credits", "CreditAccount")
    JobTemplate = apps.get_model("jobs", "JobTemplate")
    User = apps.get_model("auth", "User")
    for gpu_type, weight in SEED_WEIGHTS.items():
        BurnWeight.objects.get_or_create(
            gpu_type=gpu_type,
            effective_from=SINCE,
            defaults={"credits_per_gpu_second": weight, "note": "seed: list-price ratio to the RTX 4090"},
        )
    Campaign.objects.get_or_create(code="welcome", defaults={"name": "Welcome credits (no campaign link)", "start": SINCE})
    for user_id in User.objects.values_list("pk", flat=True):
        CreditAccount.objects.get_or_create(user_id=user_id, defaults={"referral_code": secrets.token_urlsafe(9)})
        JobTemplate.objects.get_or_create(owner_id=user_id, name=TEMPLATE_NAME, defaults={"spec": TUTORIAL_SPEC})


class Migration(migrations.Migration):
    dependencies = [
        ("credits", "0001_initial"),
        ("jobs", "0001_initial"),
    ]

    operations = [
        migrations.RunPython(append_only, drop_append_only),
        migrations.RunPython(seed, migrations.RunPython.noop),
    ]
