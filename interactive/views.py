"""The sessions' pages: start one, watch it queue and start, open it, stop it."""

from __future__ import annotations

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST

from datasets.queries import mountable_versions
from groups.queries import default_group, groups_of
from interactive import actions, origins
from interactive.boards import BOARD_FIELDS
from interactive.events import session_payload
from interactive.kinds import JUPYTERLAB, KINDS, kind_for
from interactive.models import InteractiveSession
from jobs import actions as job_actions
from jobs.costs import cost_for
from jobs.forms import form_data_from_post, initial_from_spec
from jobs.live.watching import watch_pending
from jobs.models import Job, JobTemplate, Sweep
from jobs.submission import intake
from jobs.submission.quota import QuotaExceeded
from jobs.submission.spec import SpecError
from jobs.views import gpu_types_of, save_template
from plans.catalog import plan_for

# The fields a session's form has (a job's, less the command, plus the app).
DEFAULTS = {"time_limit_minutes": 120, "gpu_count": 1}


def _mine(request, pk: int) -> InteractiveSession:
    return get_object_or_404(InteractiveSession.objects.select_related("job"), pk=pk, owner=request.user)


def _images(plan, kind_code: str):
    return [image for image in settings.IMAGE_CATALOGUE.for_plan(plan.code) if kind_code in image.apps]


@login_required
def session_list(request):
    sessions = InteractiveSession.objects.filter(owner=request.user).select_related("job")[:100]
    return render(request, "interactive/list.html", {"sessions": sessions})


def _board_choices(user):
    """A board's choices: the owner's latest jobs that reached Slurm (not a session's, not a sweep
    task) and sweeps, newest first."""
    jobs = (
        Job.objects.filter(owner=user, array__isnull=True, slurm_job_id__isnull=False, interactive_session__isnull=True)
        .only("pk", "name", "state", "created_at")
        .order_by("-pk")[:50]
    )
    sweeps = Sweep.objects.filter(owner=user).only("pk", "name", "point_count").order_by("-pk")[:50]
    return jobs, sweeps


@login_required
def session_new(request):
    errors: dict = {}
    plan = plan_for(request.user)
    values = dict(DEFAULTS)
    kind = kind_for(request.POST.get("kind") if request.method == "POST" else request.GET.get("kind")) or JUPYTERLAB
    if request.method == "GET":
        for field in BOARD_FIELDS:
            if request.GET.get(field, "").isdigit():
                values[field] = request.GET[field]
    if request.method == "POST":
        data = form_data_from_post(request.POST)
        data.pop("command", None)
        data["kind"] = request.POST.get("kind", JUPYTERLAB.code)
        if "group" in request.POST:
            data["group"] = request.POST["group"] or None
        for field in BOARD_FIELDS:
            if request.POST.get(field):
                data[field] = request.POST[field]
        values = {**values, **request.POST.dict()}
        try:
            session = actions.start(request, data)
        except SpecError as exc:
            errors = exc.errors
        except (QuotaExceeded, job_actions.NotProvisioned, intake.RateLimited) as exc:
            errors = {"form": [str(exc)]}
        else:
            template_name = request.POST.get("save_template", "").strip()
            if template_name:
                save_template(request, template_name[:64], session.job.spec, kind=session.kind)
            # Transient: the session page drops it once the session's state moves on.
            messages.success(
                request,
                f"{KINDS[session.kind].title} requested: it starts as soon as a GPU is free.",
                extra_tags="transient",
            )
            return redirect("interactive:detail", pk=session.pk)
    elif request.GET.get("clone", "").isdigit() or request.GET.get("template", "").isdigit():
        if request.GET.get("clone", "").isdigit():
            cloned = _mine(request, int(request.GET["clone"]))
            source = cloned.job.spec
            # A clone is the same app on the same runs.
            kind = kind_for(cloned.kind) or kind
            values.update({"board_job": cloned.board_job_id or "", "board_sweep": cloned.board_sweep_id or ""})
        else:
            source = get_object_or_404(
                JobTemplate, pk=int(request.GET["template"]), owner=request.user, kind=kind.code
            ).spec
        values = {**values, **initial_from_spec(source)}
    board_jobs, board_sweeps = _board_choices(request.user) if kind.needs_board else ((), ())
    context = {
        "values": values,
        "errors": errors,
        "kind": kind,
        "kinds": KINDS.values(),
        "board_jobs": board_jobs,
        "board_sweeps": board_sweeps,
        "images": _images(plan, kind.code),
        "gpu_types": gpu_types_of(plan),
        "groups": groups_of(request.user).order_by("name"),
        "default_group": default_group(request.user),
        "dataset_versions": mountable_versions(request.user),
        "idle_minutes": plan.session_idle_minutes,
        "templates": JobTemplate.objects.filter(owner=request.user, kind=kind.code),
    }
    return render(request, "interactive/new.html", context, status=400 if errors else 200)


def _detail_context(session: InteractiveSession) -> dict:
    return {
        "session": session,
        "kind": kind_for(session.kind),
        "job": session.job,
        "payload": session_payload(session),
        "cost": cost_for(session.job),
        "idle_warning_minutes": settings.SESSION_IDLE_WARNING_SECONDS // 60,
    }


@login_required
def session_detail(request, pk: int):
    session = _mine(request, pk)
    watch_pending([session.job])
    return render(request, "interactive/detail.html", _detail_context(session))


@login_required
@require_POST
def session_stop(request, pk: int):
    session = _mine(request, pk)
    try:
        actions.stop(session)
        messages.success(request, "The session is stopping.")
    except job_actions.CancelRefused as exc:
        messages.error(request, str(exc))
    return redirect("interactive:detail", pk=session.pk)


@login_required
def session_open(request, host_key: str):
    """The way into a session's origin: its owner gets a one-time ticket, anybody else a 404."""
    session = InteractiveSession.objects.filter(host_key=host_key, owner=request.user).first()
    if session is None:
        raise Http404("No such session.")
    landing = kind_for(session.kind).landing_path
    return redirect(origins.open_url(session, request.user, request.GET.get("next", landing)))
