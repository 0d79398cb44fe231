from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.db import IntegrityError
from django.http import Http404, HttpResponse, JsonResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.utils import timezone
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_POST

from accounts.access import role_required
from accounts.models import Role
from audit.log import record
from cluster.clusters.registry import primary_cluster_name
from cluster.records.queries import job_clusters, nodes_by_gpu_type
from datasets.queries import mountable_versions
from foundation.ratelimit import hit
from groups.queries import GroupError, default_group, groups_of, membership, sees_everyone, visible_group
from jobs import actions
from jobs.costs import cost_for
from jobs.diagnosis.reasons import explain_reason
from jobs.drivers import drivers_by_gpu_type
from jobs.efficiency import efficiency_for
from jobs.forms import combination_errors, form_data_from_post, initial_from_spec, sweep_form
from jobs.live.events import job_payload
from jobs.live.watching import watch_pending
from jobs.logs import job_logs, job_logs_for_people
from jobs.models import Job, JobTemplate
from jobs.right_size import Proposal, proposal_for, proposal_for_template
from jobs.right_size import apply as apply_share
from jobs.submission import intake
from jobs.submission.clusters import ANY, cluster_asked_by
from jobs.submission.quota import QuotaExceeded
from jobs.submission.spec import SpecError, SpecPolicy, parse_job_spec
from plans.catalog import plan_for
from plans.rates import NoRateCard, rates_for_plan
from plans.spot import DAY, NIGHT
from reservations.queries import usable_reservations


@login_required
def job_list(request):
    jobs = Job.objects.filter(owner=request.user)
    clusters = job_clusters()
    chosen = request.GET.get("cluster", "")
    if chosen and chosen in {cluster.name for cluster in clusters}:
        jobs = jobs.filter(cluster=chosen)
    else:
        chosen = ""
    jobs = list(jobs.order_by("-created_at", "-id")[:100])
    watch_pending(jobs)
    return render(request, "jobs/list.html", {"jobs": jobs, "clusters": clusters, "chosen_cluster": chosen})


@login_required
def group_jobs(request, group_id: int):
    """A group's jobs: its PI and managers see every member's (state, GPUs, times; their logs
    only where the owner shared them: a job's page stays its owner's), a member their own;
    anyone else a 404."""
    try:
        group = visible_group(request.user, group_id)
    except GroupError as exc:
        raise Http404(exc.message) from None
    jobs = Job.objects.filter(group=group).select_related("owner")
    if not sees_everyone(request.user, group):
        jobs = jobs.filter(owner=request.user)
    mine = membership(request.user, group.pk)
    context = {
        "group": group,
        "jobs": list(jobs.order_by("-created_at", "-id")[:200]),
        "show_owner": True,
        "reads_shared_logs": sees_everyone(request.user, group),
        "manages": bool(mine and mine.may_manage),
    }
    return render(request, "jobs/group_list.html", context)


@login_required
@require_POST
def group_job_cancel(request, group_id: int, pk: int):
    """The group's PI or a manager cancels a member's group job: the group pays for it, so they
    may stop it (a member who left, a run that went wrong). Anyone else: a 404, as for a job that
    does not exist."""
    mine = membership(request.user, group_id)
    if mine is None or not mine.may_manage:
        raise Http404("No such job.")
    job = get_object_or_404(Job, pk=pk, group_id=group_id)
    try:
        actions.cancel(job)
    except actions.CancelRefused as exc:
        messages.error(request, str(exc))
    else:
        record(request.user, "job.cancel_for_group", f"job:{job.pk}", after={"group": group_id, "owner": job.owner_id})
        messages.success(request, f"Job {job.pk} ({job.name}) of {job.owner} cancelled.")
    return redirect("jobs:group", group_id=group_id)


@login_required
@require_POST
def share_logs(request, pk: int):
    """The owner shares a group job's logs with the group's PI and managers, or stops sharing."""
    job = get_object_or_404(Job, pk=pk, owner=request.user, group__isnull=False)
    share = request.POST.get("share") == "1"
    Job.objects.filter(pk=job.pk).update(logs_shared_at=timezone.now() if share else None)
    return redirect("jobs:detail", pk=job.pk)


@login_required
def shared_logs(request, group_id: int, pk: int):
    """A member's group job's logs, read by the group's PI or a manager, once the owner shared
    them; anyone else (and a job not shared) gets a 404, as for a job that does not exist."""
    try:
        group = visible_group(request.user, group_id)
    except GroupError as exc:
        raise Http404(exc.message) from None
    if not sees_everyone(request.user, group):
        raise Http404("No such job.")
    job = get_object_or_404(
        Job.objects.select_related("owner", "group"), pk=pk, group=group, logs_shared_at__isnull=False
    )
    decision = hit("logs-web", str(request.user.pk), limit=settings.API_LOG_READS_PER_MINUTE)
    if not decision.allowed:
        return HttpResponse(f"Too many log reads; try again in {decision.retry_after} s.", status=429)
    logs = job_logs_for_people(job, settings.LOG_TAIL_BYTES)
    return render(request, "jobs/shared_logs.html", {"group": group, "job": job, "logs": logs})


@login_required
def job_detail(request, pk: int):
    # Another user's job is a 404, not a 403: its existence is not theirs to learn.
    job = get_object_or_404(
        Job.objects.select_related("owner", "group", "sweep", "array").prefetch_related("datasets__version"),
        pk=pk,
        owner=request.user,
    )
    watch_pending([job])
    logs = job_logs_for_people(job, settings.LOG_TAIL_BYTES)
    return render(
        request,
        "jobs/detail.html",
        {
            "job": job,
            "logs": logs,
            "reason_text": explain_reason(job.state_reason),
            "cost": cost_for(job),
            "efficiency": efficiency_for(job) if job.is_final else None,
        },
    )


@login_required
def job_summary(request, pk: int):
    """The state-dependent part of the job page alone: live updates swap it in whole."""
    job = get_object_or_404(
        Job.objects.select_related("sweep", "array").prefetch_related("datasets__version"), pk=pk, owner=request.user
    )
    watch_pending([job])
    context = {"job": job, "reason_text": explain_reason(job.state_reason), "cost": cost_for(job)}
    if job.is_final:
        # The diagnosis is part of the summary; logs are read only once the job has ended.
        context["logs"] = {"diagnosis": job_logs(job, settings.LOG_TAIL_BYTES)["diagnosis"]}
    return render(request, "jobs/_summary.html", context)


@login_required
def job_logs_json(request, pk: int):
    job = get_object_or_404(Job, pk=pk, owner=request.user)
    # Each read opens the job's files and runs the analyser: a few open pages are fine,
    # a script hammering it is not. The same budget as the API's log reads.
    decision = hit("logs-web", str(request.user.pk), limit=settings.API_LOG_READS_PER_MINUTE)
    if not decision.allowed:
        response = JsonResponse({"detail": f"Too many log reads; try again in {decision.retry_after} s."}, status=429)
        response["Retry-After"] = str(decision.retry_after)
        return response
    return JsonResponse({"job": job_payload(job), **job_logs_for_people(job, settings.LOG_TAIL_BYTES)})


def job_status(request):
    """The live pages' polling fallback: the user's latest jobs, as the socket sends them.
    Signed out, a 401 in JSON, not a redirect to the sign-in page: a page left open would
    fetch that page in the background and replace the CSRF cookie under a sign-in form open
    in another tab (its next sign-in then failed with 403)."""
    if not request.user.is_authenticated:
        return JsonResponse({"detail": "Signed out: sign in again to see your jobs."}, status=401)
    jobs = list(Job.objects.filter(owner=request.user).order_by("-updated_at")[:100])
    watch_pending(jobs)
    return JsonResponse({"jobs": [job_payload(job) for job in jobs]})


def _spot_shares(plan) -> list[tuple[str, str, str]]:
    """[(GPU type, night %, day %)] of the plan's current rate card (plans/spot.py), for the form."""
    try:
        rates = rates_for_plan(plan)
    except NoRateCard:
        return []
    return [
        (
            gpu_type,
            f"{rates.spot_multiplier(gpu_type, NIGHT) * 100:.0f}",
            f"{rates.spot_multiplier(gpu_type, DAY) * 100:.0f}",
        )
        for gpu_type in plan.gpu_quota
    ]


def gpu_types_of(plan):
    return [(name, info) for name, info in settings.GPU_TYPES.items() if name in plan.gpu_quota]


def _accept_job(request, data: dict) -> tuple[Job | None, dict]:
    """The form's job, accepted (with its message, and its template saved), or the errors."""
    refused = combination_errors(data, own_cluster=primary_cluster_name())
    if refused:
        # Nothing submitted; the spec's own problems are said on the same press.
        return None, {**_spec_errors(request.user, data), **refused}
    try:
        job = intake.accept(request, data)
    except SpecError as exc:
        return None, exc.errors
    except (QuotaExceeded, actions.NotProvisioned, intake.RateLimited) as exc:
        return None, {"form": [str(exc)]}
    template_name = request.POST.get("save_template", "").strip()
    if template_name:
        save_template(request, template_name[:64], job.spec)
    if job.slurm_job_id:
        messages.success(request, f"Job {job.pk} ({job.name}) accepted: Slurm job {job.slurm_job_id}.")
    else:  # the worker's way: the page follows it to Slurm live
        messages.success(request, f"Job {job.pk} ({job.name}) accepted; it goes to Slurm in a moment.")
    return job, {}


def _warn_if_not_offered(request, cluster: str) -> None:
    """A clone's cluster the form cannot offer now would be dropped silently: say so."""
    if cluster in ("", ANY):
        return
    offered = {view.name: view for view in job_clusters()}
    view = offered.get(cluster)
    if view is None:
        why = "takes no jobs from the portal now"
    elif view.state not in ("up", "unknown"):
        why = "is not answering now"
    else:
        return
    messages.warning(request, f"The job ran on {cluster}, which {why}: choose a cluster.")


def _spec_errors(user, data: dict) -> dict:
    """What the spec checks (jobs.submission.spec) find in the form's job, without submitting it."""
    not_spec = ("reservation", "group", "cluster", "keep_whole_gpu")
    job_data = {key: value for key, value in data.items() if key not in not_spec}
    try:
        parse_job_spec(job_data, plan=plan_for(user), policy=SpecPolicy.from_settings())
    except SpecError as exc:
        return exc.errors
    return {}


def _id_or_404(text: str) -> int:
    if not text.isdigit():
        raise Http404("No such job or template.")
    return int(text)


# Marketing's accounts run campaigns, not jobs: the form is the users' and the admins'.
@role_required(Role.USER, Role.ADMIN)
def job_new(request):
    errors: dict = {}
    sweep_context: dict = {}
    right_size = None
    chosen_datasets: set[int] = set()
    values = {"time_limit_minutes": 60, "gpu_count": 1, "command": "", "environment": ""}
    if request.method == "POST":
        data = form_data_from_post(request.POST)
        if request.POST.get("reservation"):
            data["reservation"] = request.POST["reservation"]
        if request.POST.get("cluster"):
            data["cluster"] = request.POST["cluster"]
        # "" charges oneself; a group's id charges it (the select always sends one or the other).
        if "group" in request.POST:
            data["group"] = request.POST["group"] or None
        values = {**values, **request.POST.dict()}
        chosen_datasets = {int(value) for value in request.POST.getlist("datasets") if value.isdigit()}
        if request.POST.get("sweep") == "on" and sweep_form() is not None:
            outcome = sweep_form()(request, data, request.POST)
            if outcome.sweep is not None:
                messages.success(request, f"Sweep {outcome.sweep.name} accepted: {outcome.sweep.point_count} tasks.")
                return redirect("sweeps:sweep", pk=outcome.sweep.pk)
            errors, sweep_context = outcome.errors, outcome.context
        else:
            if request.POST.get("keep_whole_gpu"):
                data["keep_whole_gpu"] = True
            job, errors = _accept_job(request, data)
            if job is not None:
                return redirect("jobs:detail", pk=job.pk)
    else:
        values, chosen_datasets, right_size = _form_from_source(request, values)
    plan = plan_for(request.user)
    images = settings.IMAGE_CATALOGUE.for_plan(plan.code)
    context = {
        "values": values,
        "errors": errors,
        "gpu_types": gpu_types_of(plan),
        "templates": JobTemplate.objects.filter(owner=request.user, kind=""),
        "reservations": usable_reservations(request.user),
        # The portal's own first, then the further clusters that take its jobs.
        "job_clusters": job_clusters(),
        "groups": groups_of(request.user).order_by("name"),
        "default_group": default_group(request.user),
        "is_clone": "clone" in request.GET,
        "right_size": right_size,
        # Where the offer's link goes back to: the clone's job or the template.
        "right_size_source": f"clone={request.GET['clone']}"
        if "clone" in request.GET
        else f"template={request.GET.get('template', '')}",
        "plan_shrinks": plan.right_sizing == "shrink",
        # For the maintenance hint (static/js/maintenance_hint.js): whether a window holds every node of a type.
        "gpu_type_nodes": nodes_by_gpu_type(),
        # The picker: the catalogue images of the user's plan (foundation/images.py).
        "images": images,
        "dataset_versions": mountable_versions(request.user),
        "chosen_datasets": chosen_datasets,
        "spot_allowed": plan.allows_spot,
        **sweep_context,
        "spot_shares": _spot_shares(plan),
        "spot_grace_seconds": settings.SPOT_GRACE_SECONDS,
        "spot_exempt_minutes": settings.SPOT_PREEMPT_EXEMPT_SECONDS // 60,
        # For the picker's driver check (static/js/image_driver.js, jobs/drivers.py).
        "image_driver_data": {
            "images": {image.reference: {"cuda": image.cuda, "min_driver": image.min_driver} for image in images},
            "drivers": drivers_by_gpu_type(),
        },
    }
    return render(request, "jobs/new.html", context, status=400 if errors else 200)


def _form_from_source(request, values: dict) -> tuple[dict, set[int], Proposal | None]:
    """The form filled from `?clone=` (a job of the user's) or `?template=`, with the share right-sizing
    offers for it (`&share=GB` takes the offer; `&whole=1` asks again for the whole GPU a plan shrank)."""
    clone_id, template_id = request.GET.get("clone", ""), request.GET.get("template", "")
    if clone_id:
        cloned = get_object_or_404(Job, pk=_id_or_404(clone_id), owner=request.user)
        source = cloned.spec
    elif template_id:
        cloned, source = (
            None,
            get_object_or_404(JobTemplate, pk=_id_or_404(template_id), owner=request.user, kind="").spec,
        )
    else:
        return values, set(), None
    values = initial_from_spec(source)
    chosen_datasets = {int(value) for value in source.get("datasets", []) if isinstance(value, int)}
    if cloned is not None:
        # The cluster is not in the spec: the clone asks where its job's owner asked.
        values["cluster"] = cluster_asked_by(cloned)
        _warn_if_not_offered(request, values["cluster"])
        if cloned.right_sized and request.GET.get("whole") == "1":
            values.update(gpu_count=cloned.right_sized["asked_gpus"], gpu_memory_gb="", keep_whole_gpu="on")
            messages.info(request, "Asking for the whole GPU again: your plan will not right-size this job.")
            return values, chosen_datasets, None
        right_size = proposal_for(cloned, request.user)
    else:
        right_size = proposal_for_template(source, request.user)
    if right_size is not None and request.GET.get("share") == str(right_size.share_gb):
        messages.info(request, f"Asking for a {right_size.share_gb} GB share of a GPU instead of the whole GPU.")
        return apply_share(values, right_size), chosen_datasets, None
    return values, chosen_datasets, right_size


def save_template(request, name: str, spec: dict, kind: str = "") -> None:
    """The user's template `name` made or replaced (a session's with its `kind`), within the
    per-user limit; a message says when it could not be."""
    mine = JobTemplate.objects.filter(owner=request.user)
    if not mine.filter(name=name).exists() and mine.count() >= settings.MAX_JOB_TEMPLATES_PER_USER:
        messages.warning(
            request,
            f"Template not saved: you have {settings.MAX_JOB_TEMPLATES_PER_USER} templates, the most allowed. "
            "Delete one on the new-job page first.",
        )
        return
    try:
        JobTemplate.objects.update_or_create(owner=request.user, name=name, defaults={"spec": spec, "kind": kind})
    except IntegrityError:
        messages.warning(request, "The template could not be saved.")


@login_required
@require_POST
def template_delete(request, pk: int):
    template = get_object_or_404(JobTemplate, pk=pk, owner=request.user)
    template.delete()
    messages.success(request, f"Template {template.name} deleted.")
    # Back to the form it was listed on (a session's form lists its own templates).
    next_url = request.POST.get("next", "")
    if next_url and url_has_allowed_host_and_scheme(next_url, allowed_hosts={request.get_host()}):
        return redirect(next_url)
    return redirect("jobs:new")


@login_required
@require_POST
def job_cancel(request, pk: int):
    job = get_object_or_404(Job, pk=pk, owner=request.user)
    try:
        actions.cancel(job)
        messages.success(request, f"Job {job.pk} ({job.name}) cancelled.")
    except actions.CancelRefused as exc:
        messages.error(request, str(exc))
    next_url = request.POST.get("next", "")
    if next_url and url_has_allowed_host_and_scheme(next_url, allowed_hosts={request.get_host()}):
        return redirect(next_url)
    return redirect("jobs:detail", pk=job.pk)
