from django.apps import AppConfig


class DatasetsConfig(AppConfig):
    name = "datasets"

    def ready(self):
        from datasets import receivers, signals

        signals.version_committed.connect(receivers.enqueue_verification, dispatch_uid="datasets-verify")
