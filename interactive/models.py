"""An interactive session: a Slurm job (jobs.Job) that runs an app's server (JupyterLab), reached
only through the portal's proxy (interactive/proxy.py) at an origin of its own."""

import secrets

from django.conf import settings
from django.db import models

from interactive.kinds import kind_for
from jobs.models import FINAL_STATES, JobState


def new_token() -> str:
    return secrets.token_urlsafe(32)


def new_host_key() -> str:
    # Lower-case letters and digits: a DNS label (the session's host name, interactive/origins.py).
    return secrets.token_hex(8)


class SessionState(models.TextChoices):
    QUEUED = "queued", "Queued"
    STARTING = "starting", "Starting"
    READY = "ready", "Ready"
    STOPPED = "stopped", "Stopped"
    FAILED = "failed", "Failed"


class InteractiveSession(models.Model):
    class StopReason(models.TextChoices):
        USER = "user", "stopped by its owner"
        IDLE = "idle", "stopped after being idle"

    job = models.OneToOneField("jobs.Job", on_delete=models.CASCADE, related_name="interactive_session")
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="interactive_sessions")
    kind = models.CharField(max_length=32)
    # The server's password: set by the portal in the job's environment, added by the proxy to
    # every request it forwards; never sent to a browser.
    token = models.CharField(max_length=64, default=new_token, editable=False)
    # The session's own origin is s-<host_key>.<SESSIONS_DOMAIN> (interactive/origins.py).
    host_key = models.CharField(max_length=16, unique=True, default=new_host_key, editable=False)
    # Where the server listens, once its job said (the job's first output lines) and it answered.
    address = models.CharField(max_length=255, blank=True)
    port = models.PositiveIntegerField(null=True, blank=True)
    ready_at = models.DateTimeField(null=True, blank=True)
    # Seconds from the job's start to the server answering: the app's own start, apart from Slurm's.
    server_start_seconds = models.DecimalField(max_digits=9, decimal_places=3, null=True, blank=True)
    # Idle culling (interactive/actions/culling.py): the newest kernel or terminal activity seen, and
    # the warning (cleared when the session is used again).
    last_activity_at = models.DateTimeField(null=True, blank=True)
    # The kernels' own part of it (never the GPUs'): what the dev cluster's GPU emulator draws from.
    kernel_activity_at = models.DateTimeField(null=True, blank=True)
    # What the proxy saw pass through a JupyterLab terminal's socket (interactive/terminal_activity.py):
    # a keystroke in, and output out (output alone keeps a session only while its GPUs move).
    terminal_input_at = models.DateTimeField(null=True, blank=True)
    terminal_output_at = models.DateTimeField(null=True, blank=True)
    # A page of the session opened or reloaded in the browser (the proxy sees the navigation), and
    # what VS Code's client sends of its own accord (interactive/browser_activity.py).
    browser_input_at = models.DateTimeField(null=True, blank=True)
    idle_warned_at = models.DateTimeField(null=True, blank=True)
    stop_reason = models.CharField(max_length=8, choices=StopReason.choices, blank=True)
    # What a TensorBoard session shows (interactive/boards.py): one of its owner's jobs, or sweeps.
    board_job = models.ForeignKey("jobs.Job", null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    board_sweep = models.ForeignKey("jobs.Sweep", null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    # What went wrong starting it, in words its owner may read.
    error = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at"]
        indexes = [models.Index(fields=["owner", "-created_at"])]

    def __str__(self):
        return f"{self.kind} session {self.pk} of job {self.job_id}"

    @property
    def kind_title(self) -> str:
        kind = kind_for(self.kind)
        return kind.title if kind is not None else self.kind

    @property
    def state(self) -> str:
        job = self.job
        if job.state in FINAL_STATES:
            if self.ready_at is None and job.state != JobState.CANCELLED and not self.stop_reason:
                return SessionState.FAILED
            return SessionState.STOPPED
        if self.error:
            return SessionState.FAILED
        if self.stop_reason:
            return SessionState.STOPPED
        if job.state == JobState.RUNNING:
            return SessionState.READY if self.ready_at else SessionState.STARTING
        return SessionState.QUEUED
