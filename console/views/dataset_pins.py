"""Admins pin a dataset version to nodes (jobs/actions.py): the page lists the nodes with
an NVMe cache, which hold the version, which have it pinned and how its staging job went."""

from __future__ import annotations

from django.contrib import messages
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST

from accounts.access import role_required
from accounts.models import Role
from cluster.models import Node
from datasets.actions.node_cache import pins_by_node
from datasets.models import DatasetVersion, NodeCopy
from datasets.queries import DatasetError
from jobs import actions as job_actions


def _version(pk: int) -> DatasetVersion:
    return get_object_or_404(DatasetVersion.objects.select_related("dataset"), pk=pk)


@role_required(Role.ADMIN)
def version_pins(request, pk: int):
    version = _version(pk)
    pins = pins_by_node(version)
    holding = set(NodeCopy.objects.filter(version=version).values_list("node", flat=True))
    rows = [
        {
            "node": node,
            "pin": pins.get(node.name),
            "holds": node.name in holding,
            "job": job_actions.staging_job(version, node.name) if node.name in pins else None,
        }
        for node in Node.objects.filter(nvme_gb__gt=0).order_by("name")
    ]
    return render(request, "console/dataset_pins.html", {"version": version, "rows": rows})


@role_required(Role.ADMIN)
@require_POST
def pin_version(request, pk: int):
    version = _version(pk)
    nodes = request.POST.getlist("node")
    try:
        pins = job_actions.pin_version(request.user, version, nodes)
    except DatasetError as exc:
        messages.error(request, exc.message)
    else:
        names = ", ".join(pin.node for pin in pins)
        messages.success(
            request, f"{version.dataset.name} v{version.number} pinned on {names}; staging jobs submitted."
        )
    return redirect("console:dataset_pins", pk=version.pk)


@role_required(Role.ADMIN)
@require_POST
def unpin_version(request, pk: int):
    version = _version(pk)
    node = request.POST.get("node", "")
    if job_actions.unpin(request.user, version, node):
        messages.success(request, f"Unpinned from {node}: its copy stays until the cache needs the room.")
    else:
        messages.error(request, f"{version.dataset.name} v{version.number} is not pinned on {node}.")
    return redirect("console:dataset_pins", pk=version.pk)
