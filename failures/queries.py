"""Reads for the admins' page of failures: unrecognised failures grouped by signature, a rule tried on
past runs, each rule's figures beside the users' marks. Admin pages only (the views check the role)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import timedelta

from django.db.models import Count, Max, Q
from django.utils import timezone

from failures.models import DiagnosisMark, FinishedRun, SiteRule
from failures.site_rules import enabled_rules
from jobs.diagnosis.diagnose import SHIPPED_RULES, diagnose
from jobs.diagnosis.rules import Rule

WEEK, MONTH = 7, 30
GROUPS_SHOWN = 50
# A rule is tried on at most this many of the latest runs of each kind: a preview stays quick.
TRY_MAX_RUNS = 2_000
# Runs listed by name in a preview (the counts cover all that were tried).
TRY_LISTED = 20


def _since(days: int):
    return timezone.now() - timedelta(days=days)


def _unrecognised():
    return FinishedRun.objects.filter(outcome=FinishedRun.Outcome.FAILED, rule_id="", ended_at__gte=_since(MONTH))


@dataclass
class FailureGroup:
    signature: str
    text: str
    last_7_days: int
    last_30_days: int
    users: list[str]
    images: list[str]
    latest_at: object
    sample: FinishedRun | None = None


def unrecognised_groups(limit: int = GROUPS_SHOWN) -> list[FailureGroup]:
    """The groups of failed runs that no rule recognised, the most frequent this week first."""
    rows = (
        _unrecognised()
        .values("signature")
        .annotate(
            last_30_days=Count("pk"),
            last_7_days=Count("pk", filter=Q(ended_at__gte=_since(WEEK))),
            latest_at=Max("ended_at"),
        )
        .order_by("-last_7_days", "-last_30_days", "-latest_at")[:limit]
    )
    groups = []
    for row in rows:
        group = FailureGroup(row["signature"], "", row["last_7_days"], row["last_30_days"], [], [], row["latest_at"])
        _fill(group)
        groups.append(group)
    return groups


def _fill(group: FailureGroup, listed: int = 5) -> None:
    runs = _unrecognised().filter(signature=group.signature)
    group.sample = runs.select_related("owner", "job").order_by("-ended_at").first()
    group.text = group.sample.signature_text if group.sample else ""
    group.users = sorted(
        set(runs.exclude(owner=None).values_list("owner__username", flat=True).distinct()[: listed + 1])
    )
    group.images = sorted(set(runs.exclude(image="").values_list("image", flat=True).distinct()[: listed + 1]))


def failure_group(signature: str) -> FailureGroup | None:
    runs = _unrecognised().filter(signature=signature)
    counts = runs.aggregate(
        last_30_days=Count("pk"), last_7_days=Count("pk", filter=Q(ended_at__gte=_since(WEEK))), latest=Max("ended_at")
    )
    if not counts["last_30_days"]:
        return None
    group = FailureGroup(signature, "", counts["last_7_days"], counts["last_30_days"], [], [], counts["latest"])
    _fill(group, listed=20)
    return group


@dataclass
class TryOut:
    """What a candidate rule would do to past runs."""

    tried_failed: int = 0
    tried_healthy: int = 0
    names_unrecognised: int = 0
    comes_first_recognised: int = 0
    flags_healthy: int = 0
    in_group: int = 0  # of the group it was written for, how many it names
    group_size: int = 0
    named: list[FinishedRun] = field(default_factory=list)
    taken_over: list[tuple[FinishedRun, str]] = field(default_factory=list)  # (run, the rule that named it)
    flagged: list[FinishedRun] = field(default_factory=list)


def _latest(queryset):
    return (
        queryset.filter(ended_at__gte=_since(MONTH)).select_related("owner", "job").order_by("-ended_at")[:TRY_MAX_RUNS]
    )


def try_rule(candidate: Rule, written_for: str = "") -> TryOut:
    """The candidate on the last 30 days: the unrecognised failures it would name, the recognised ones it
    would come first on (taking them from another rule), and the healthy runs it would wrongly flag."""
    pattern = candidate.patterns[0]
    others = tuple(rule for rule in enabled_rules() if rule.rule_id != candidate.rule_id)
    out = TryOut()
    for run in _latest(FinishedRun.objects.filter(outcome=FinishedRun.Outcome.FAILED)):
        out.tried_failed += 1
        in_group = bool(written_for) and run.signature == written_for and run.rule_id == ""
        out.group_size += in_group
        if pattern.search(run.tail) is None:
            continue
        out.in_group += in_group
        if run.rule_id == "":
            out.names_unrecognised += 1
            if len(out.named) < TRY_LISTED:
                out.named.append(run)
            continue
        findings = diagnose(
            run.tail, state=run.state, exit_code=run.exit_code, extra_rules=(*others, candidate), max_findings=1
        )
        if findings and findings[0].rule_id == candidate.rule_id:
            out.comes_first_recognised += 1
            if len(out.taken_over) < TRY_LISTED:
                out.taken_over.append((run, run.rule_id))
    for run in _latest(FinishedRun.objects.filter(outcome=FinishedRun.Outcome.HEALTHY)):
        out.tried_healthy += 1
        if pattern.search(run.tail) is not None:
            out.flags_healthy += 1
            if len(out.flagged) < TRY_LISTED:
                out.flagged.append(run)
    return out


@dataclass(frozen=True)
class RuleFigures:
    rule_id: str
    title: str
    origin: str  # "shipped" or "site"
    enabled: bool
    named_30_days: int
    helped: int
    wrong: int
    site_rule: SiteRule | None = None


def rule_figures() -> list[RuleFigures]:
    """Every rule, shipped and the site's, with the failed runs it named in 30 days and the users' marks."""
    named = {
        row["rule_id"]: row["n"]
        for row in FinishedRun.objects.filter(outcome=FinishedRun.Outcome.FAILED, ended_at__gte=_since(MONTH))
        .exclude(rule_id="")
        .values("rule_id")
        .annotate(n=Count("pk"))
    }
    marks: dict[str, dict[str, int]] = {}
    for row in DiagnosisMark.objects.values("rule_id", "verdict").annotate(n=Count("pk")):
        marks.setdefault(row["rule_id"], {})[row["verdict"]] = row["n"]

    def figures(rule_id, title, origin, enabled, site_rule=None):
        verdicts = marks.get(rule_id, {})
        return RuleFigures(
            rule_id,
            title,
            origin,
            enabled,
            named.get(rule_id, 0),
            verdicts.get(DiagnosisMark.Verdict.HELPED, 0),
            verdicts.get(DiagnosisMark.Verdict.WRONG, 0),
            site_rule,
        )

    site = [figures(row.rule_id, row.title, "site", row.enabled, row) for row in SiteRule.objects.order_by("slug")]
    shipped = [figures(rule.rule_id, rule.title, "shipped", True) for rule in SHIPPED_RULES]
    return site + shipped
