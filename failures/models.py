"""What the diagnosis read in finished jobs, the rules a site writes for what it did not recognise,
and what users said of a diagnosis.

A `FinishedRun` is kept for every job that ended, failed or healthy: the failed ones unrecognised
are grouped on the admins' page by their signature (jobs.diagnosis.signature); the healthy ones are
the controls a new rule is tried against (it must not flag them). Each keeps a bounded tail of the
log, so a rule can be tried on past logs without reading the cluster's files again.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models

from jobs.diagnosis.rules import Stage

SITE_RULE_PREFIX = "site-"


class FinishedRun(models.Model):
    class Outcome(models.TextChoices):
        FAILED = "failed", "failed"
        HEALTHY = "healthy", "healthy"

    job = models.OneToOneField("jobs.Job", on_delete=models.CASCADE, related_name="finished_run")
    outcome = models.CharField(max_length=10, choices=Outcome.choices)
    ended_at = models.DateTimeField()
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    image = models.CharField(max_length=300, blank=True)
    state = models.CharField(max_length=32, blank=True)
    exit_code = models.IntegerField(null=True, blank=True)
    # The first finding's rule id ("" when nothing was recognised), as of `diagnosed_at`.
    rule_id = models.CharField(max_length=80, blank=True)
    signature = models.CharField(max_length=64)
    signature_text = models.TextField(blank=True)
    # The log's last bytes (failures.actions.TAIL_CHARS at most).
    tail = models.TextField(blank=True)
    diagnosed_at = models.DateTimeField()

    class Meta:
        indexes = [
            models.Index(fields=["outcome", "rule_id", "-ended_at"]),
            models.Index(fields=["signature", "-ended_at"]),
        ]

    def __str__(self):
        return f"job {self.job_id}: {self.outcome} {self.rule_id or 'unrecognised'}"


class SiteRule(models.Model):
    """A rule an admin wrote (failures.actions): a pattern in RE2 syntax, which runs in linear time
    whatever is written, and the words the user reads."""

    slug = models.SlugField(max_length=60, unique=True)
    title = models.CharField(max_length=120)
    cause = models.TextField(max_length=1000)
    fix = models.TextField(max_length=1000)
    pattern = models.TextField(max_length=500)
    stage = models.IntegerField(choices=[(stage.value, stage.name.lower()) for stage in Stage], default=Stage.PROGRAM)
    enabled = models.BooleanField(default=False)
    # The signature of the group it was written for, if any.
    written_for = models.CharField(max_length=64, blank=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["slug"]

    def __str__(self):
        return self.rule_id

    @property
    def rule_id(self) -> str:
        return SITE_RULE_PREFIX + self.slug


class DiagnosisMark(models.Model):
    """A user's word on one finding of their job's diagnosis: it helped, or it was wrong."""

    class Verdict(models.TextChoices):
        HELPED = "helped", "helped"
        WRONG = "wrong", "wrong"

    job = models.ForeignKey("jobs.Job", on_delete=models.CASCADE, related_name="+")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    rule_id = models.CharField(max_length=80)
    verdict = models.CharField(max_length=10, choices=Verdict.choices)
    marked_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["job", "user", "rule_id"], name="one_mark_per_finding_and_user")]

    def __str__(self):
        return f"job {self.job_id}: {self.rule_id} {self.verdict}"
