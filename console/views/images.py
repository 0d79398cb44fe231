"""Console → Images (admins): the catalogue, what each node last reported holding, prewarm or
remove an image on every node with progress, and how long images took to start."""

from django.conf import settings
from django.contrib import messages
from django.db import transaction
from django.http import JsonResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_POST

from accounts.access import role_required
from accounts.models import Role
from cluster.models import Node
from console.actions import image_operations
from console.actions.image_operations import OperationRefused
from console.image_starts import start_times_by_image
from console.models import ImageOperation, NodeImage
from console.tasks import run_image_operation

RECENT_OPERATIONS = 10


@role_required(Role.ADMIN)
def images(request):
    catalogue = settings.IMAGE_CATALOGUE.images
    nodes = list(Node.objects.order_by("name").values_list("name", flat=True))
    listed = list(NodeImage.objects.all())
    held: dict[str, dict[str, NodeImage]] = {}
    for row in listed:
        held.setdefault(row.file, {})[row.node] = row
    starts = start_times_by_image()
    rows = []
    for image in catalogue:
        on_nodes = held.get(image.prewarm_file, {})
        rows.append(
            {
                "image": image,
                "cells": [on_nodes.get(node) for node in nodes],
                "count": sum(1 for node in nodes if node in on_nodes),
                "starts": starts.get(image.reference),
            }
        )
    strays = sorted(set(held) - {image.prewarm_file for image in catalogue})
    operations = list(ImageOperation.objects.select_related("requested_by")[:RECENT_OPERATIONS])
    progresses = [(op, image_operations.progress(op)) for op in operations]
    context = {
        "rows": rows,
        "nodes": nodes,
        # Rows per node, a cell per catalogue image: what that node last listed (None: not there).
        "matrix": [(node, [(row["image"], row["cells"][i]) for row in rows]) for i, node in enumerate(nodes)],
        "strays": strays,
        "runtime": settings.JOB_RUNTIME,
        "operations": progresses,
        # While a node's job is still to end, the page re-reads itself (static/js/live_parts.js).
        "busy": any(not progress["finished"] for _op, progress in progresses),
        "reported_at": min((row.reported_at for row in listed), default=None),
        "can_operate": bool(settings.CLUSTER_OPS_GROUP),
    }
    return render(request, "console/images.html", context)


@role_required(Role.ADMIN)
@require_POST
def image_operation_start(request):
    kind = request.POST.get("kind", "")
    if kind not in ImageOperation.Kind.values:
        messages.error(request, "Unknown image operation.")
        return redirect("console:images")
    try:
        operation = image_operations.start(request.user, kind, request.POST.get("image", ""))
    except OperationRefused as exc:
        messages.error(request, str(exc))
        return redirect("console:images")
    transaction.on_commit(lambda: run_image_operation.delay(operation.pk))
    messages.success(request, f"{operation}: one job per node submitted; progress below.")
    return redirect(reverse("console:images") + f"#operation-{operation.pk}")


@role_required(Role.ADMIN)
def image_operation_progress(request, pk: int):
    operation = get_object_or_404(ImageOperation, pk=pk)
    return JsonResponse(image_operations.progress(operation))
