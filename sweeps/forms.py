"""The job form's sweep: the first press quotes it (tasks, the most it can cost, what plan hours
and credits cover, the command one task runs), the second, on the same input, submits it."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field

from jobs import actions as job_actions
from jobs.models import Sweep
from jobs.submission import intake as job_intake
from jobs.submission.quota import QuotaExceeded
from jobs.submission.spec import SpecError, SpecPolicy
from plans.catalog import plan_for
from sweeps import intake, queries
from sweeps.parameters import command_shown


@dataclass
class FormOutcome:
    sweep: Sweep | None = None
    errors: dict = field(default_factory=dict)
    context: dict = field(default_factory=dict)


def _fingerprint(user_id: int, parsed: intake.SweepRequest, group) -> str:
    """What the quote was for: the same input quoted again has the same one."""
    data = [user_id, parsed.spec.to_dict(), parsed.grid.to_dict(), parsed.throttle, parsed.metric_name, group]
    return hashlib.sha256(json.dumps(data, sort_keys=True, default=str).encode()).hexdigest()[:32]


def quote_or_submit(request, job_data: dict, post) -> FormOutcome:
    data = {
        **job_data,
        "parameters": post.get("parameters", "").replace("\r\n", "\n"),
        "throttle": post.get("throttle", "").strip(),
        "metric": post.get("metric", "").strip(),
        "metric_goal": post.get("metric_goal", "min"),
    }
    try:
        parsed = intake.parse_sweep(data, plan=plan_for(request.user), policy=SpecPolicy.from_settings())
    except SpecError as exc:
        return FormOutcome(errors=exc.errors)
    fingerprint = _fingerprint(request.user.pk, parsed, data.get("group", "default"))
    if post.get("confirm") == fingerprint:
        try:
            return FormOutcome(sweep=intake.accept(request, data))
        except SpecError as exc:
            errors = exc.errors
        except (QuotaExceeded, job_actions.NotProvisioned, job_intake.RateLimited) as exc:
            errors = {"form": [str(exc)]}
        # Refused as it was submitted (too many submissions a minute, say): the quote stays
        # confirmed, so one press sends the same sweep again.
        return FormOutcome(errors=errors, context=_quoted(request, parsed, fingerprint))
    return FormOutcome(context=_quoted(request, parsed, fingerprint))


def _quoted(request, parsed: intake.SweepRequest, fingerprint: str) -> dict:
    """The page's quote of the sweep, and the confirmation its next press sends."""
    points = len(parsed.grid)
    return {
        "sweep_points": points,
        "sweep_quote": queries.quote_sweep(request.user, parsed.spec, points),
        "sweep_confirm": fingerprint,
        "sweep_example": command_shown(parsed.spec.command, parsed.grid.point(0)),
    }
