from django.apps import AppConfig


class JobsConfig(AppConfig):
    name = "jobs"

    def ready(self):
        from datasets.actions import register_deletion_check
        from jobs import receivers  # noqa: F401
        from jobs.submission.datasets import unfinished_jobs_mounting

        register_deletion_check("jobs.unfinished_mounts", unfinished_jobs_mounting)
