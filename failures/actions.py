"""Every write of failures/: a finished job's run recorded, a site rule written, enabled or
disabled (audited), a user's mark on a diagnosis.

Recording is idempotent (one row per job, rewritten in place), so the task may run twice or late;
enabling a rule re-labels the past failures it now names, disabling it gives them back to the
other rules, both inside the transaction that flips the rule.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from django.db import transaction
from django.utils import timezone

from audit.log import record
from failures.models import SITE_RULE_PREFIX, DiagnosisMark, FinishedRun, SiteRule
from failures.site_rules import as_rule, compile_pattern, enabled_rules
from jobs.diagnosis.diagnose import SHIPPED_RULES, diagnose
from jobs.diagnosis.rules import Stage
from jobs.diagnosis.signature import signature_of
from jobs.logs import job_log_tails, log_text
from jobs.models import Job, JobState

# The log's last characters kept per run: enough for the tracebacks and summaries rules match.
TAIL_CHARS = 16_000
# How far back a rule's effect reaches when it is enabled or disabled, and how many runs it re-reads.
RELABEL_DAYS = 30
RELABEL_MAX_RUNS = 5_000
# Not failures to learn from: the user stopped the job, or Slurm never had it.
_NOT_LEARNED_FROM = frozenset({JobState.CANCELLED, JobState.SUBMIT_FAILED})


class RuleError(ValueError):
    """A rule that cannot be saved, and why, per field."""

    def __init__(self, errors: dict[str, str]):
        super().__init__("; ".join(f"{field}: {text}" for field, text in errors.items()))
        self.errors = errors


def outcome_of(job: Job) -> str | None:
    if not job.is_final or job.state in _NOT_LEARNED_FROM:
        return None
    if job.state == JobState.COMPLETED and job.exit_code in (0, None):
        return FinishedRun.Outcome.HEALTHY
    return FinishedRun.Outcome.FAILED


def record_finished_job(job_id: int) -> FinishedRun | None:
    """Read the ended job's log tail once, diagnose it and keep it; None for a job not (yet) to learn from."""
    job = Job.objects.filter(pk=job_id).first()
    outcome = outcome_of(job) if job is not None else None
    if outcome is None:
        return None
    stdout, stderr = job_log_tails(job, TAIL_CHARS)
    text = log_text(stdout, stderr)[-TAIL_CHARS:]
    findings = diagnose(text, state=job.state, exit_code=job.exit_code, extra_rules=enabled_rules(), max_findings=1)
    signature = signature_of(text)
    run, _ = FinishedRun.objects.update_or_create(
        job=job,
        defaults={
            "outcome": outcome,
            "ended_at": job.end_time or timezone.now(),
            "owner_id": job.owner_id,
            "image": job.image,
            "state": job.state,
            "exit_code": job.exit_code,
            "rule_id": findings[0].rule_id if findings else "",
            "signature": signature.digest,
            "signature_text": signature.text,
            "tail": text,
            "diagnosed_at": timezone.now(),
        },
    )
    return run


@dataclass(frozen=True)
class RuleFields:
    slug: str
    title: str
    cause: str
    fix: str
    pattern: str
    stage: int
    written_for: str = ""


def check_rule(fields: RuleFields, *, editing: SiteRule | None = None) -> None:
    errors: dict[str, str] = {}
    taken = SiteRule.objects.filter(slug=fields.slug)
    if editing is not None:
        taken = taken.exclude(pk=editing.pk)
    if not fields.slug:
        errors["slug"] = "Give the rule a short name (letters, digits and dashes)."
    elif taken.exists() or any(rule.rule_id == SITE_RULE_PREFIX + fields.slug for rule in SHIPPED_RULES):
        errors["slug"] = "Another rule has this name."
    for name in ("title", "cause", "fix"):
        if not getattr(fields, name).strip():
            errors[name] = "Say it in a few words: the user reads it on the job page."
    if fields.stage not in {stage.value for stage in Stage}:
        errors["stage"] = "Choose where the failure sits in the chain of cause and effect."
    try:
        compile_pattern(fields.pattern)
    except ValueError as exc:
        errors["pattern"] = str(exc)
    if errors:
        raise RuleError(errors)


def _as_dict(rule: SiteRule) -> dict:
    return {
        "slug": rule.slug,
        "title": rule.title,
        "cause": rule.cause,
        "fix": rule.fix,
        "pattern": rule.pattern,
        "stage": rule.stage,
        "enabled": rule.enabled,
    }


def write_rule(admin, fields: RuleFields, *, rule: SiteRule | None = None) -> SiteRule:
    """Create a rule (disabled: it is tried before it speaks) or edit one; audited. An enabled rule's
    edit takes effect on the next diagnosis; its past labels stay until it is disabled and enabled."""
    check_rule(fields, editing=rule)
    with transaction.atomic():
        before = _as_dict(rule) if rule is not None else {}
        if rule is None:
            rule = SiteRule(created_by=admin if getattr(admin, "pk", None) else None)
        for name in ("slug", "title", "cause", "fix", "pattern", "stage", "written_for"):
            setattr(
                rule,
                name,
                getattr(fields, name).strip() if isinstance(getattr(fields, name), str) else getattr(fields, name),
            )
        rule.save()
        record(
            admin,
            "diagnosis_rule.edit" if before else "diagnosis_rule.create",
            rule.rule_id,
            before=before,
            after=_as_dict(rule),
        )
    return rule


def _recent(queryset):
    return queryset.filter(ended_at__gte=timezone.now() - timedelta(days=RELABEL_DAYS)).order_by("-ended_at")[
        :RELABEL_MAX_RUNS
    ]


def set_enabled(admin, rule_pk: int, enabled: bool) -> tuple[SiteRule, int]:
    """Enable or disable a rule; (the rule, how many past failed runs changed label). Audited."""
    with transaction.atomic():
        rule = SiteRule.objects.select_for_update().get(pk=rule_pk)
        if rule.enabled == enabled:
            return rule, 0
        # A conditional update: two admins clicking at once change it once.
        SiteRule.objects.filter(pk=rule.pk, enabled=not enabled).update(enabled=enabled, updated_at=timezone.now())
        rule.refresh_from_db()
        if enabled:
            compiled = as_rule(rule).patterns[0]
            candidates = _recent(FinishedRun.objects.filter(outcome=FinishedRun.Outcome.FAILED, rule_id=""))
            named = [run.pk for run in candidates.only("pk", "tail") if compiled.search(run.tail)]
            changed = FinishedRun.objects.filter(pk__in=named).update(rule_id=rule.rule_id, diagnosed_at=timezone.now())
        else:
            changed = 0
            others = enabled_rules()
            for run in _recent(FinishedRun.objects.filter(rule_id=rule.rule_id)):
                findings = diagnose(
                    run.tail, state=run.state, exit_code=run.exit_code, extra_rules=others, max_findings=1
                )
                run.rule_id = findings[0].rule_id if findings else ""
                run.diagnosed_at = timezone.now()
                run.save(update_fields=["rule_id", "diagnosed_at"])
                changed += 1
        record(
            admin,
            "diagnosis_rule.enable" if enabled else "diagnosis_rule.disable",
            rule.rule_id,
            before={"enabled": not enabled},
            after={"enabled": enabled},
            result=f"{changed} past failed runs relabelled",
        )
    return rule, changed


def mark_diagnosis(user, job: Job, rule_id: str, verdict: str) -> DiagnosisMark:
    """The user's word on one finding of their own job (the view has checked the job is theirs)."""
    if verdict not in DiagnosisMark.Verdict.values:
        raise ValueError("Say whether the diagnosis helped or was wrong.")
    known = {rule.rule_id for rule in SHIPPED_RULES} | {rule.rule_id for rule in SiteRule.objects.all()}
    if rule_id not in known:
        raise ValueError("That is not a finding of this job's diagnosis.")
    mark, _ = DiagnosisMark.objects.update_or_create(job=job, user=user, rule_id=rule_id, defaults={"verdict": verdict})
    return mark
