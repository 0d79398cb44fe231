from django.apps import AppConfig


class ReservationsConfig(AppConfig):
    name = "reservations"

    def ready(self):
        from reservations import receivers  # noqa: F401  (connects the plan-change receiver)
