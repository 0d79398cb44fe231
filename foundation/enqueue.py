"""Handing work to a worker without losing it when the broker is down."""

from __future__ import annotations

import logging

log = logging.getLogger(__name__)


def delay_or_leave_to_sweep(task, *args, sweep: str) -> None:
    """`task.delay(*args)`; with the broker down, nothing runs here: `sweep` (a periodic task that
    finds what was missed) does the work later. For work that must not hold the caller's thread."""
    try:
        task.delay(*args)
    except Exception:
        log.warning("could not enqueue %s%s; the sweep will (%s)", task.name, args, sweep, exc_info=True)


def delay_or_run(task, *args) -> None:
    """`task.delay(*args)`; with the broker down, the task is run here rather than lost (its
    own retries do not apply then: a failure is logged)."""
    try:
        task.delay(*args)
    except Exception as exc:
        log.warning("could not enqueue %s%s (running it now): %s", task.name, args, exc)
        try:
            task.apply(args=args)
        except Exception:
            log.exception("%s%s failed", task.name, args)
