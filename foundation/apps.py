from django.apps import AppConfig


class FoundationConfig(AppConfig):
    # An app only so that Django finds its template filters (`{% load money units %}`).
    name = "foundation"
