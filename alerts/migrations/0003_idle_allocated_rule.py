from django.db import migrations, models

from alerts.defaults import ensure_idle_allocated_rule


def add_idle_allocated_rule(apps, schema_editor):
    ensure_idle_allocated_rule(apps.get_model("alerts", "AlertRule"))


class Migration(migrations.Migration):
    dependencies = [("alerts", "0002_default_rule")]
    operations = [
        migrations.AlterField(
            model_name="alertrule",
            name="metric",
            field=models.CharField(
                choices=[
                    ("memory_used_percent", "GPU memory used (%)"),
                    ("compute_util", "Compute utilisation (%)"),
                    ("temperature_c", "Temperature (°C)"),
                    ("idle_allocated", "Compute of a GPU a job holds (%), under"),
                ],
                max_length=32,
            ),
        ),
        migrations.RunPython(add_idle_allocated_rule, migrations.RunPython.noop),
    ]
