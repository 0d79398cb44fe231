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
