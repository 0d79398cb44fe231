from django.db import migrations


def add_default_rule(apps, schema_editor):
    AlertRule = apps.get_model("alerts", "AlertRule")
    AlertRule.objects.get_or_create(
        name="GPU memory above 90% for 5 minutes",
        defaults={
            "metric": "memory_used_percent",
            "threshold": 90.0,
            "window_seconds": 300,
            "cooldown_seconds": 1800,
            "enabled": True,
            "email_admins": True,
        },
    )


class Migration(migrations.Migration):
    dependencies = [("alerts", "0001_initial")]
    operations = [migrations.RunPython(add_default_rule, migrations.RunPython.noop)]
