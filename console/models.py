from django.conf import settings
from django.db import models


class DiagnosticRun(models.Model):
    """A "diagnose" request for one GPU: a short Slurm job pinned to that node."""

    requested_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE)
    node = models.CharField(max_length=100)
    index = models.PositiveSmallIntegerField()
    job = models.ForeignKey("jobs.Job", null=True, on_delete=models.SET_NULL)
    error = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self):
        return f"diagnose {self.node}/{self.index}"


class GpuReset(models.Model):
    """An admin's GPU reset: hold the node for maintenance, run the reset job, release it.

    Slurm runs no new job on a DRAINed node, not even in a reservation (seen on 24.11), so
    the "drain" here is a MAINT reservation on the node: it keeps everyone else's new jobs
    off it while the reset job, inside the reservation, gets the GPUs once they are free.
    """

    class Step(models.TextChoices):
        RESERVING = "reserving"
        RESETTING = "resetting"
        RELEASING = "releasing"
        DONE = "done"
        FAILED = "failed"

    requested_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL)
    node = models.CharField(max_length=100)
    index = models.PositiveSmallIntegerField()
    step = models.CharField(max_length=16, choices=Step.choices, default=Step.RESERVING)
    reservation = models.CharField(max_length=64, blank=True)
    job = models.ForeignKey("jobs.Job", null=True, on_delete=models.SET_NULL)
    result = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self):
        return f"reset {self.node}/{self.index} ({self.step})"


class ImageOperation(models.Model):
    """An admin's prewarm or removal of one catalogue image on every node, or a fresh inventory
    of what the nodes hold: one pinned job per node (console/actions/image_operations.py)."""

    class Kind(models.TextChoices):
        PREWARM = "prewarm"
        REMOVE = "remove"
        INVENTORY = "inventory"

    kind = models.CharField(max_length=16, choices=Kind.choices)
    # The catalogue reference (repository:tag) and its file on the nodes; blank for an inventory.
    image = models.CharField(max_length=300, blank=True)
    file = models.CharField(max_length=255, blank=True)
    requested_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL)
    created_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self):
        return f"{self.kind} {self.image or 'all'}"


class ImageOperationNode(models.Model):
    """One node's part of an image operation: its pinned job, and how it ended."""

    class State(models.TextChoices):
        SUBMITTING = "submitting"
        WAITING = "waiting"  # the job is queued or running
        DONE = "done"
        FAILED = "failed"

    operation = models.ForeignKey(ImageOperation, on_delete=models.CASCADE, related_name="nodes")
    node = models.CharField(max_length=100)
    state = models.CharField(max_length=16, choices=State.choices, default=State.SUBMITTING)
    job = models.ForeignKey("jobs.Job", null=True, blank=True, on_delete=models.SET_NULL)
    # What the node's tool said: "imported in 41 s", "already there", or why it failed.
    result = models.TextField(blank=True)
    # For a prewarm: seconds the import itself took on that node (None: kept, or failed).
    import_seconds = models.PositiveIntegerField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["node"]
        constraints = [models.UniqueConstraint(fields=["operation", "node"], name="one_part_per_node")]

    def __str__(self):
        return f"{self.operation} on {self.node}: {self.state}"


class NodeImage(models.Model):
    """A prewarmed image file as a node last listed it (every image operation's job ends with
    the node's listing). `reported_at` says how fresh that is: nothing here is guessed."""

    node = models.CharField(max_length=100)
    file = models.CharField(max_length=255)
    bytes = models.BigIntegerField()
    modified_at = models.DateTimeField()
    reported_at = models.DateTimeField()

    class Meta:
        ordering = ["node", "file"]
        constraints = [models.UniqueConstraint(fields=["node", "file"], name="one_row_per_node_image")]

    def __str__(self):
        return f"{self.file} on {self.node}"


class PowerDecision(models.Model):
    """What the power policy did and why (console/actions/power.py), newest first on the operations page."""

    class Kind(models.TextChoices):
        POWERED_DOWN = "powered_down", "Idle node powered down"
        POWERED_UP = "powered_up", "Powered up for the day"
        WOKEN = "woken", "Standby node woken"
        STANDBY = "standby", "Back to standby"
        KEPT_ON = "kept_on", "Kept on by an admin"
        RELEASED = "released", "Released by an admin"

    kind = models.CharField(max_length=16, choices=Kind.choices)
    node = models.CharField(max_length=100, blank=True)
    detail = models.CharField(max_length=200, blank=True)
    # The jobs waiting for the node's GPU type when the decision was taken.
    queue_length = models.PositiveIntegerField(null=True, blank=True)
    decided_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-decided_at", "-id"]

    def __str__(self):
        return f"{self.get_kind_display()} {self.node}".strip()


class PoweredOnPin(models.Model):
    """A node an admin keeps powered on (Slurm's SuspendExcNodes)."""

    node = models.CharField(max_length=100, unique=True)
    pinned_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    pinned_at = models.DateTimeField(auto_now_add=True)

    def __str__(self):
        return self.node


class MaintenanceWindow(models.Model):
    """Planned maintenance (console/actions/maintenance.py): a Slurm MAINT reservation of all nodes or
    some, which holds every job whose time limit would cross it; users see it a day ahead."""

    class State(models.TextChoices):
        PLANNED = "planned", "planned"
        CANCELLED = "cancelled", "cancelled"

    start = models.DateTimeField()
    end = models.DateTimeField()
    # Empty: every node of the pool.
    nodes = models.JSONField(default=list, blank=True)
    reason = models.CharField(max_length=300)
    state = models.CharField(max_length=10, choices=State.choices, default=State.PLANNED)
    slurm_name = models.CharField(max_length=64, blank=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)
    # The canary run once the window ended (console/actions/canary.py): set once, by a conditional UPDATE.
    canary = models.ForeignKey("CanaryRun", null=True, blank=True, on_delete=models.SET_NULL, related_name="+")

    class Meta:
        ordering = ["start"]
        constraints = [
            models.CheckConstraint(condition=models.Q(end__gt=models.F("start")), name="window_ends_after_start")
        ]

    def __str__(self):
        return f"maintenance {self.start:%Y-%m-%d %H:%M}-{self.end:%H:%M} ({self.state})"


class CanaryRun(models.Model):
    """A canary after a change (console/actions/canary.py): a short job per node, pinned to it, that
    starts a container in the pool's runtime and checks its GPU; a node that fails is drained."""

    class Trigger(models.TextChoices):
        MANUAL = "manual", "started by an admin"
        WINDOW_ENDED = "window_ended", "a maintenance window ended"
        ROLLING_RESTART = "rolling_restart", "a rolling restart ended"
        SLURMCTLD_RESTART = "slurmctld", "slurmctld restarted"
        IMAGE_PREWARMED = "image", "an image was prewarmed on the nodes"

    trigger = models.CharField(max_length=16, choices=Trigger.choices)
    reason = models.CharField(max_length=300, blank=True)
    image = models.CharField(max_length=300)
    started_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    started_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-started_at", "-pk"]

    def __str__(self):
        return f"canary {self.pk} ({self.trigger})"


class CanaryCheck(models.Model):
    """One node's part of a canary run."""

    class State(models.TextChoices):
        RUNNING = "running", "running"
        PASSED = "passed", "passed"
        FAILED = "failed", "failed"

    run = models.ForeignKey(CanaryRun, on_delete=models.CASCADE, related_name="checks")
    node = models.CharField(max_length=100)
    job = models.ForeignKey("jobs.Job", null=True, on_delete=models.SET_NULL, related_name="+")
    state = models.CharField(max_length=8, choices=State.choices, default=State.RUNNING)
    # In words: what failed (the job's own line, or why it never ran).
    detail = models.CharField(max_length=500, blank=True)
    drained = models.BooleanField(default=False)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["node"]
        constraints = [models.UniqueConstraint(fields=["run", "node"], name="one_canary_check_per_node_and_run")]

    def __str__(self):
        return f"canary {self.run_id} on {self.node}: {self.state}"


class RollingRestart(models.Model):
    """An admin's restart of a set of nodes one at a time (console/actions/rolling_restart.py): each
    node is drained, restarted by Slurm once its jobs have ended (`scontrol reboot ASAP`) and brought
    back before the next is asked; the other nodes, and their jobs, are never touched."""

    class State(models.TextChoices):
        RUNNING = "running", "running"
        STOPPED = "stopped", "stopped by an admin"
        DONE = "done", "done"
        FAILED = "failed", "failed"

    reason = models.CharField(max_length=200)
    state = models.CharField(max_length=8, choices=State.choices, default=State.RUNNING)
    started_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    started_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    # In words: why it failed or who stopped it.
    detail = models.CharField(max_length=500, blank=True)
    canary = models.ForeignKey(CanaryRun, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    # The article's beta partition: a tenth of the nodes (one at least) restarted first and checked by
    # a canary (`gate`) before the rest are asked; a failure there stops the restart.
    canary_first = models.BooleanField(default=False, db_default=False)
    gate = models.ForeignKey(CanaryRun, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")

    class Meta:
        ordering = ["-started_at", "-pk"]
        constraints = [
            # One at a time: two would take down two nodes at once.
            models.UniqueConstraint(fields=["state"], condition=models.Q(state="running"), name="one_rolling_restart")
        ]

    def __str__(self):
        return f"rolling restart {self.pk} ({self.state})"


class RollingRestartStep(models.Model):
    """One node's turn: asked of Slurm, restarting, back (or failed, or skipped when stopped)."""

    class State(models.TextChoices):
        WAITING = "waiting", "waiting for its turn"
        DRAINING = "draining", "draining: restarts once its jobs end"
        RESTARTING = "restarting", "restarting"
        DONE = "done", "back in service"
        FAILED = "failed", "failed"
        SKIPPED = "skipped", "skipped (stopped before its turn)"

    restart = models.ForeignKey(RollingRestart, on_delete=models.CASCADE, related_name="steps")
    node = models.CharField(max_length=100)
    position = models.PositiveSmallIntegerField()
    state = models.CharField(max_length=12, choices=State.choices, default=State.WAITING)
    asked_at = models.DateTimeField(null=True, blank=True)
    restarting_since = models.DateTimeField(null=True, blank=True)
    done_at = models.DateTimeField(null=True, blank=True)
    detail = models.CharField(max_length=500, blank=True)

    class Meta:
        ordering = ["position"]
        constraints = [
            models.UniqueConstraint(fields=["restart", "node"], name="a_node_once_per_rolling_restart"),
            models.UniqueConstraint(fields=["restart", "position"], name="one_step_per_position"),
        ]

    def __str__(self):
        return f"{self.restart} {self.node}: {self.state}"


class SlurmctldStart(models.Model):
    """Each start of slurmctld the portal has seen (its BOOT_TIME): a new one after the first is a
    restart, and gets a canary (console/actions/canary.py). Unique, so two passes add it once."""

    started_at = models.DateTimeField(unique=True)
    seen_at = models.DateTimeField(auto_now_add=True)
    canary = models.ForeignKey(CanaryRun, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")

    class Meta:
        ordering = ["-started_at"]

    def __str__(self):
        return f"slurmctld started {self.started_at:%Y-%m-%d %H:%M:%S}"
