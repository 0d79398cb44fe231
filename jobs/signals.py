"""Signals jobs send to the layers above it (credits, billing), which must not be imported here."""

from django.dispatch import Signal

# Sent after the transaction that changed a job's row has committed (from
# jobs.live.events.publish_job_update, which every writer of a job's state calls on commit),
# with `job`: the row as it is now. Receivers read the mirror's state, never the browser's;
# they are called with send_robust, so one that fails never stops the mirror.
job_changed = Signal()

# Sent after the transaction in which tasks of a job array ended has committed (from the mirror,
# jobs/mirror/arrays.py), with `array_pk`: sweeps (sweeps/receivers.py) read their
# metrics then, without the mirror knowing of sweeps.
array_tasks_ended = Signal()
