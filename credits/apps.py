from django.apps import AppConfig


class CreditsConfig(AppConfig):
    name = "credits"
