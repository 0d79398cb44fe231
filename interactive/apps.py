from django.apps import AppConfig


class InteractiveConfig(AppConfig):
    name = "interactive"
    verbose_name = "Interactive sessions"

    def ready(self):
        from interactive import receivers  # noqa: F401
        from interactive.actions import session_environment
        from jobs.submission.environment import register_environment

        register_environment(session_environment)

        from interactive.actions.culling import emulated_idle_sessions
        from telemetry.emulator import register_idle_jobs

        register_idle_jobs(emulated_idle_sessions)
