"""Handing work to a worker without losing it when the broker is down."""

from __future__ import annotations

import logging

log = logging.getLogger(__name__)


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
