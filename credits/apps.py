from django.apps import AppConfig


class CreditsConfig(AppConfig):
    name = "credits"

    def ready(self):
        from credits import receivers  # noqa: F401
