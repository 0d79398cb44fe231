from django.db import migrations

from alerts.defaults import ensure_default_rule


def add_default_rule(apps, schema_editor):
    ensure_default_rule(apps.get_model("alerts", "AlertRule"))


class Migration(migrations.Migration):
    dependencies = [("alerts", "0001_initial")]
    operations = [migrations.RunPython(add_default_rule, migrations.RunPython.noop)]
