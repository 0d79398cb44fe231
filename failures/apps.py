from django.apps import AppConfig


class FailuresConfig(AppConfig):
    name = "failures"
    verbose_name = "Failures the diagnosis learns from"

    def ready(self):
        from failures import receivers  # noqa: F401
        from failures.site_rules import enabled_rules
        from jobs import site_rules

        site_rules.register(enabled_rules)
