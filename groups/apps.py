from django.apps import AppConfig


class GroupsConfig(AppConfig):
    name = "groups"
