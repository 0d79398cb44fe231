from django.apps import AppConfig


class TelemetryConfig(AppConfig):
    name = "telemetry"
    verbose_name = "GPU telemetry"

    def ready(self):
        from jobs.efficiency import register_efficiency_provider
        from telemetry import receivers  # noqa: F401
        from telemetry.efficiency import efficiencies

        register_efficiency_provider(efficiencies)
