"""The admins' page of failures nobody recognised, the rules written for them, and the users' marks
on a diagnosis. Admin pages answer 403 to everyone else (accounts.access.role_required); a mark is
taken only on the user's own job (another's is a 404)."""

from __future__ import annotations

import json
import re

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST

from accounts.access import role_required
from accounts.models import Role
from failures import actions, queries
from failures.forms import SiteRuleForm
from failures.models import SiteRule
from failures.site_rules import as_rule
from jobs.diagnosis.rules import Stage
from jobs.models import Job

_SIGNATURE = re.compile(r"[0-9a-f]{64}")
# A folded line's placeholders (jobs.diagnosis.signature) as the pattern pieces that match what they hid.
_PLACEHOLDERS = {
    re.escape("<n>"): r"\d+(?:\.\d+)*",
    re.escape("<path>"): r"\S+",
    re.escape("<hex>"): r"[0-9a-fA-Fx]+",
    re.escape("<address>"): r"[\d.:]+",
    re.escape("<time>"): r"[\d:T .,-]+",
    re.escape("<id>"): r"[0-9a-fA-F-]+",
}


def suggested_pattern(signature_text: str) -> str:
    """A first pattern for a group: its last folded line, escaped, with each placeholder matching again."""
    lines = [line for line in signature_text.splitlines() if line.strip()]
    if not lines:
        return ""
    pattern = re.escape(lines[-1][:200]).replace("\\ ", " ")  # a space needs no escape; it reads better bare
    for placeholder, piece in _PLACEHOLDERS.items():
        pattern = pattern.replace(placeholder, piece)
    return pattern


@role_required(Role.ADMIN)
def failure_groups(request):
    return render(request, "failures/groups.html", {"groups": queries.unrecognised_groups()})


@role_required(Role.ADMIN)
def failure_group(request, signature: str):
    group = queries.failure_group(signature) if _SIGNATURE.fullmatch(signature) else None
    if group is None:
        raise Http404("No unrecognised failures have this signature in the last 30 days.")
    form = SiteRuleForm(
        initial={"written_for": signature, "pattern": suggested_pattern(group.text), "stage": Stage.PROGRAM.value}
    )
    return render(request, "failures/group.html", {"group": group, "form": form})


def _fields(form: SiteRuleForm) -> actions.RuleFields:
    data = form.cleaned_data
    return actions.RuleFields(
        slug=data["slug"],
        title=data["title"],
        cause=data["cause"],
        fix=data["fix"],
        pattern=data["pattern"],
        stage=data["stage"],
        written_for=data.get("written_for") or "",
    )


def _candidate(fields: actions.RuleFields):
    return as_rule(
        SiteRule(
            slug=fields.slug,
            title=fields.title,
            cause=fields.cause,
            fix=fields.fix,
            pattern=fields.pattern,
            stage=fields.stage,
        )
    )


@role_required(Role.ADMIN)
@require_POST
def rule_write(request, pk: int | None = None):
    """Try a rule on past runs (action=try), or save it (action=save); a saved rule starts disabled."""
    rule = get_object_or_404(SiteRule, pk=pk) if pk is not None else None
    form = SiteRuleForm(request.POST)
    preview = None
    if form.is_valid():
        fields = _fields(form)
        try:
            actions.check_rule(fields, editing=rule)
        except actions.RuleError as exc:
            for name, text in exc.errors.items():
                form.add_error(name if name in form.fields else None, text)
        else:
            if request.POST.get("action") == "save":
                rule = actions.write_rule(request.user, fields, rule=rule)
                messages.success(request, f"Rule {rule.rule_id} saved. It speaks once you enable it.")
                return redirect("failures:rule", pk=rule.pk)
            preview = queries.try_rule(_candidate(fields), fields.written_for)
    group = queries.failure_group(request.POST.get("written_for", "")) if request.POST.get("written_for") else None
    return render(
        request, "failures/rule.html", {"form": form, "rule": rule, "preview": preview, "group": group}, status=200
    )


@role_required(Role.ADMIN)
def rule_detail(request, pk: int):
    rule = get_object_or_404(SiteRule, pk=pk)
    form = SiteRuleForm(
        initial={
            "slug": rule.slug,
            "pattern": rule.pattern,
            "title": rule.title,
            "cause": rule.cause,
            "fix": rule.fix,
            "stage": rule.stage,
            "written_for": rule.written_for,
        }
    )
    preview = queries.try_rule(as_rule(rule), rule.written_for)
    group = queries.failure_group(rule.written_for) if rule.written_for else None
    return render(request, "failures/rule.html", {"form": form, "rule": rule, "preview": preview, "group": group})


@role_required(Role.ADMIN)
@require_POST
def rule_enable(request, pk: int):
    enabled = request.POST.get("enabled") == "1"
    rule, changed = actions.set_enabled(request.user, get_object_or_404(SiteRule, pk=pk).pk, enabled)
    if enabled:
        messages.success(request, f"{rule.rule_id} is enabled: it named {changed} past failure{'s' * (changed != 1)}.")
    else:
        messages.success(
            request, f"{rule.rule_id} is disabled: {changed} past failure{'s' * (changed != 1)} diagnosed again."
        )
    return redirect("failures:rule", pk=rule.pk)


@role_required(Role.ADMIN)
def rules(request):
    return render(request, "failures/rules.html", {"rules": queries.rule_figures()})


@role_required(Role.ADMIN)
def rules_export(request):
    """The enabled site rules as a file the shipped set can take (jobs/diagnosis/contributed/)."""
    document = {
        "format": "gpupool-diagnosis-rules/1",
        "rules": [
            {
                "rule_id": rule.rule_id,
                "title": rule.title,
                "cause": rule.cause,
                "fix": rule.fix,
                "patterns": [rule.pattern],
                "stage": Stage(rule.stage).name.lower(),
            }
            for rule in SiteRule.objects.filter(enabled=True).order_by("slug")
        ],
    }
    response = HttpResponse(json.dumps(document, indent=2) + "\n", content_type="application/json")
    response["Content-Disposition"] = 'attachment; filename="site-rules.json"'
    return response


@login_required
@require_POST
def mark_diagnosis(request, pk: int):
    job = get_object_or_404(Job, pk=pk, owner=request.user)
    try:
        actions.mark_diagnosis(request.user, job, request.POST.get("rule_id", ""), request.POST.get("verdict", ""))
    except ValueError as exc:
        messages.error(request, str(exc))
    else:
        messages.success(request, "Thank you: the admins see your word beside this diagnosis.")
    return redirect("jobs:detail", pk=job.pk)
