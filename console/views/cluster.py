"""The pool as users and admins see it: heatmap, node and GPU pages, alerts, node actions."""

from datetime import timedelta

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.db import transaction
from django.db.models import Count, Q
from django.http import Http404, JsonResponse
from django.shortcuts import redirect, render
from django.utils import timezone
from django.views.decorators.gzip import gzip_page
from django.views.decorators.http import require_POST

from accounts.access import role_required, user_role
from accounts.models import Role
from alerts.models import Alert
from audit.models import AuditLog
from cluster.actions import further_nodes
from cluster.clusters.registry import primary_cluster_name
from cluster.models import FurtherNode, Node, SyncRun
from console.actions import node_actions
from console.actions.diagnostics import DiagnosticRefused, latest_diagnostic, start_diagnostic
from console.heatmap import heatmap_payload, shared_heatmap
from console.models import GpuReset
from console.tasks import run_gpu_reset
from datasets.actions.node_cache import node_cache_view
from jobs.models import Job
from telemetry.actions.storage import table_sizes
from telemetry.models import GpuLatest, GpuMinute, GpuSampleRaw, cluster_key

COMPUTE_HELP = (
    "Compute utilisation: how busy the GPU's cores (SMs) are, i.e. how hard the model computes. "
    "Low compute with high memory traffic says: fix data loading (more DataLoader workers, faster storage)."
)
MEMORY_HELP = (
    "Memory utilisation: how busy the GPU's memory bandwidth is, i.e. how hard data moves. "
    "High compute with low memory traffic is compute-bound: to go faster, change the model "
    "(mixed precision, fused kernels), not the data pipeline."
)


def _is_admin(request) -> bool:
    return user_role(request.user) == Role.ADMIN


@login_required
def heatmap(request):
    return render(
        request,
        "console/heatmap.html",
        {"compute_help": COMPUTE_HELP, "memory_help": MEMORY_HELP, "is_admin": _is_admin(request)},
    )


@login_required
@gzip_page  # ~400 KB of JSON at 10,000 GPUs compresses about tenfold
def heatmap_data(request):
    return JsonResponse(heatmap_payload(request.user, is_admin=_is_admin(request), shared=shared_heatmap()))


def _shown_node_or_404(request, name: str) -> Node | FurtherNode:
    """The node `name` of the cluster `?cluster=<name>` names (none: the portal's own). A cluster
    the portal does not show nodes of is a 404, never the own cluster's node of that name."""
    try:
        node = further_nodes.node_named(request.GET.get("cluster"), name)
    except further_nodes.UnknownCluster:
        raise Http404("No such cluster.") from None
    if node is None:
        raise Http404("No such node.")
    return node


def _own_only(request, name: str) -> Node:
    """For the node actions: a request naming another cluster is refused (404), never turned into
    an action on the portal's own node of that name."""
    node = _shown_node_or_404(request, name)
    if node.further:
        raise Http404("Node actions are for the portal's own cluster.")
    return node


# Node and GPU pages show this many of the newest audit entries for them (admins only).
RECENT_ACTIONS = 10


def recent_actions(target: str) -> list[AuditLog]:
    return list(AuditLog.objects.filter(target=target)[:RECENT_ACTIONS])


# A node page lists at most this many of the node's running jobs and counts the rest: a node
# packed with shard jobs (an H100 has 20 shards a GPU) must not make the page load them all.
NODE_PAGE_JOBS = 50


def running_jobs_on(name: str, cluster: str | None = None):
    """Running jobs of `cluster` (None: the portal's own) holding GPUs of node `name` or listed on
    it, selected in the database. `nodes` is Slurm's node list: the name alone, or an item of a
    comma list."""
    return (
        Job.objects.on_cluster(cluster)
        .filter(state="RUNNING")
        .filter(
            Q(gpu_allocation__has_key=name)
            | Q(nodes=name)
            | Q(nodes__startswith=f"{name},")
            | Q(nodes__endswith=f",{name}")
            | Q(nodes__contains=f",{name},")
        )
    )


@login_required
def node_detail(request, name: str):
    node = _shown_node_or_404(request, name)
    further = node.cluster if node.further else None
    admin = _is_admin(request)
    running = running_jobs_on(name, further)
    jobs = list(running.select_related("owner").order_by("start_time", "id")[:NODE_PAGE_JOBS])
    hidden_count = max(0, running.count() - len(jobs)) if len(jobs) == NODE_PAGE_JOBS else 0
    visible_jobs = [
        {
            "job": job,
            "visible": admin or job.owner_id == request.user.pk,
            "gpus": (job.gpu_allocation or {}).get(name, []),
        }
        for job in jobs
    ]
    latest = {row.index: row for row in GpuLatest.all_clusters.filter(cluster=cluster_key(further), node=name)}
    gpus = []
    position = 0
    for group in node.gpus:
        for _ in range(group["count"]):
            gpus.append({"index": position, "type": group["type"], "sample": latest.get(position)})
            position += 1
    context = {
        "node": node,
        "gpus": gpus,
        "jobs": visible_jobs,
        "more_jobs": hidden_count,
        "is_admin": admin,
        **_cluster_context(node),
    }
    if not node.further:
        # Actions and dataset caches are the portal's own cluster's.
        context["audit"] = recent_actions(name) if admin else []
        context["dataset_cache"] = node_cache_view(name, node.nvme_gb, request.user, sees_all=admin)
    return render(request, "console/node_detail.html", context)


def _cluster_context(node: Node | FurtherNode) -> dict:
    """Which cluster the page is of, for its heading and its links: a further cluster's node is
    named with its cluster, and said to be as of its last reading when that is not recent."""
    if not node.further:
        return {"cluster_name": node.cluster, "further": False, "stale_since": None}
    fresh = timezone.now() - timedelta(seconds=further_nodes.SNAPSHOT_KEEP_SECONDS)
    return {
        "cluster_name": node.cluster,
        "further": True,
        "stale_since": node.seen_at if node.seen_at < fresh else None,
    }


@login_required
def gpu_detail(request, name: str, index: int):
    node = _shown_node_or_404(request, name)
    if index >= node.gpu_total:
        raise Http404("No such GPU on this node.")
    further = node.cluster if node.further else None
    admin = _is_admin(request)
    target = f"{name}/gpu{index}"  # as console.actions.gpu_reset writes it
    context = {
        "node": node,
        "index": index,
        "gpu_type": node.gpu_type,
        "sample": GpuLatest.all_clusters.filter(cluster=cluster_key(further), node=name, index=index).first(),
        # The emulator's samples may reach the store through the dev stack's Prometheus.
        "emulator": settings.TELEMETRY_EMULATOR,
        "is_admin": admin,
        "audit_target": target,
        **_cluster_context(node),
    }
    if not node.further:
        # Diagnostics and resets run through the portal's own cluster's Slurm.
        context["diagnostic"] = latest_diagnostic(request.user, name, index)
        context["resets"] = GpuReset.objects.filter(node=name, index=index)[:5] if admin else []
        context["audit"] = recent_actions(target) if admin else []
    return render(request, "console/gpu_detail.html", context)


# Raw samples come every ~10 s (360 an hour); an agent sending faster, or a replay, must not
# make one request load an unbounded number of rows: the newest are kept.
SERIES_MAX_POINTS = 2000
SERIES_WINDOWS = {"hour": timedelta(hours=1), "day": timedelta(days=1)}


@login_required
def gpu_series(request, name: str, index: int):
    """The last hour from raw samples (every ~10 s) and the last day from minute rollups, each
    with the x-axis range of its whole window (`<window>_range`), so a GPU that reported once
    still draws on an hour or a day, not on sub-millisecond ticks. Times are in the portal's
    time zone (Plotly draws the wall-clock time of a string and ignores its offset)."""
    node = _shown_node_or_404(request, name)
    if index >= node.gpu_total:
        raise Http404("No such GPU on this node.")
    key = cluster_key(node.cluster if node.further else None)
    now = timezone.now()
    fields = ("compute_util", "memory_util", "memory_used_mb", "memory_total_mb", "temperature_c", "power_w")

    def columns(rows, time_field):
        data = {"t": [], **{field: [] for field in fields}}
        for row in reversed(rows):  # fetched newest first, drawn oldest first
            data["t"].append(timezone.localtime(row[time_field]).isoformat())
            for field in fields:
                data[field].append(row[field])
        return data

    hour_since, day_since = now - SERIES_WINDOWS["hour"], now - SERIES_WINDOWS["day"]
    gpu = {"cluster": key, "node": name, "index": index}
    hour = GpuSampleRaw.all_clusters.filter(**gpu, time__gte=hour_since).order_by("-time")
    day = GpuMinute.all_clusters.filter(**gpu, bucket__gte=day_since).order_by("-bucket")
    return JsonResponse(
        {
            "hour": columns(list(hour.values("time", *fields)[:SERIES_MAX_POINTS]), "time"),
            "day": columns(list(day.values("bucket", *fields)[:SERIES_MAX_POINTS]), "bucket"),
            "hour_range": [timezone.localtime(hour_since).isoformat(), timezone.localtime(now).isoformat()],
            "day_range": [timezone.localtime(day_since).isoformat(), timezone.localtime(now).isoformat()],
        }
    )


@role_required(Role.ADMIN)
def alerts(request):
    return render(request, "console/alerts.html", {"alerts": Alert.objects.select_related("rule")[:200]})


@role_required(Role.ADMIN)
@require_POST
def node_drain(request, name: str):
    _own_only(request, name)
    reason = request.POST.get("reason", "").strip()
    if not reason:
        messages.error(request, "A drain needs a reason (it is shown to users and kept in Slurm).")
        return redirect("console:node_detail", name=name)
    entry = node_actions.drain(request.user, name, reason)
    (messages.success if entry.succeeded else messages.error)(request, f"Drain {name}: {entry.result}")
    return redirect("console:node_detail", name=name)


@role_required(Role.ADMIN)
@require_POST
def node_resume(request, name: str):
    _own_only(request, name)
    entry = node_actions.resume(request.user, name)
    (messages.success if entry.succeeded else messages.error)(request, f"Resume {name}: {entry.result}")
    return redirect("console:node_detail", name=name)


def telemetry_by_cluster(now) -> list[dict]:
    """Per cluster whose nodes are shown (the portal's own first): its GPUs (every node, however
    long ago a further cluster's were read), those with a sample at all and those that reported
    in the last 2 minutes."""
    recent = now - timedelta(minutes=2)
    rows = {
        row["cluster"]: row
        for row in GpuLatest.all_clusters.values("cluster").annotate(
            known=Count("id"), reporting=Count("id", filter=Q(time__gte=recent))
        )
    }
    gpus: dict[str, int] = {}
    for node in further_nodes.nodes_in_pool():
        gpus[node.cluster] = gpus.get(node.cluster, 0) + node.gpu_total
    clusters = [primary_cluster_name(), *further_nodes.shown_clusters()]
    return [
        {
            "name": name,
            "gpus": gpus.get(name, 0),
            "known": rows.get(cluster_key(name), {}).get("known", 0),
            "reporting": rows.get(cluster_key(name), {}).get("reporting", 0),
        }
        for name in clusters
    ]


@role_required(Role.ADMIN)
def telemetry_status(request):
    by_cluster = telemetry_by_cluster(timezone.now())
    context = {
        "sizes": table_sizes(),
        "raw_retention": settings.TELEMETRY_RAW_RETENTION,
        "minute_retention": settings.TELEMETRY_MINUTE_RETENTION,
        "hour_retention": settings.TELEMETRY_HOUR_RETENTION,
        "emulator": settings.TELEMETRY_EMULATOR,
        "by_cluster": by_cluster if len(by_cluster) > 1 else [],
        "gpus_reporting": sum(row["reporting"] for row in by_cluster),
        "gpus_total": sum(row["gpus"] for row in by_cluster),
        "sync_runs": {run.name: run for run in SyncRun.objects.all()},
    }
    return render(request, "console/telemetry.html", context)


@login_required
@require_POST
def gpu_diagnose(request, name: str, index: int):
    node = _own_only(request, name)
    if index >= node.gpu_total:
        raise Http404("No such GPU on this node.")
    try:
        run = start_diagnostic(request.user, name, index, node.gpus[0]["type"])
    except DiagnosticRefused as exc:
        messages.error(request, str(exc))
    else:
        if run.error:
            messages.error(request, f"Slurm refused the diagnostic job: {run.error}")
        else:
            messages.success(
                request, f"Diagnostic job {run.job.pk} submitted to {name}: its result shows below when it ends."
            )
    return redirect("console:gpu_detail", name=name, index=index)


@role_required(Role.ADMIN)
@require_POST
def gpu_reset_view(request, name: str, index: int):
    node = _own_only(request, name)
    if index >= node.gpu_total:
        raise Http404("No such GPU on this node.")
    if not request.user.profile.provisioned_at:
        messages.error(request, "Your own cluster account is not ready; the reset job runs as you.")
        return redirect("console:gpu_detail", name=name, index=index)
    reset = GpuReset.objects.create(requested_by=request.user, node=name, index=index)
    # The row is committed already (one write, no transaction here): the worker takes it now.
    transaction.on_commit(lambda: run_gpu_reset.delay(reset.pk))
    messages.success(request, f"GPU reset of {name} GPU {index} started: the node is held, then reset, then released.")
    return redirect("console:gpu_detail", name=name, index=index)
