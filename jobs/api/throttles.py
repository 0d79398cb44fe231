"""How often one user may read job logs (the API's logs and the downloads): each read opens
files in the job's directory and runs the analyser over up to two tails."""

from __future__ import annotations

from django.conf import settings
from rest_framework.throttling import BaseThrottle

from foundation.ratelimit import RateDecision, hit


def log_read(user) -> RateDecision:
    """Count one log read of `user`; refused past API_LOG_READS_PER_MINUTE in a minute."""
    return hit("logs", f"user:{user.pk}", limit=settings.API_LOG_READS_PER_MINUTE)


class LogReadThrottle(BaseThrottle):
    """Keyed on the user, not the address: behind a proxy every user shares one. Counted in
    Redis, so every web process shares the count."""

    def allow_request(self, request, view) -> bool:
        if not request.user or not request.user.is_authenticated:
            return True  # refused by the permission check, which runs first
        self.decision = log_read(request.user)
        return self.decision.allowed

    def wait(self) -> float | None:
        decision = getattr(self, "decision", None)
        return decision.retry_after if decision is not None else None
