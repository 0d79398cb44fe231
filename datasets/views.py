"""The Datasets pages: the user's and their groups' datasets, a form to create one, and a
dataset's versions with the browser's resumable upload (static/js/datasets_upload.js, which
speaks the tus API: /api/v1/datasets/...)."""

from __future__ import annotations

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.db.models import Prefetch
from django.http import Http404
from django.shortcuts import redirect, render
from django.utils import timezone
from django.views.decorators.http import require_POST

from accounts.access import is_admin, role_required
from accounts.models import Role
from datasets import actions, over_quota
from datasets.forms import DatasetForm
from datasets.models import DatasetVersion, VersionState
from datasets.queries import DatasetError, may_write, own_datasets, readable_dataset
from datasets.quota import describe, quota_bytes, quota_refusal, used_bytes


def _with_versions(rows):
    return rows.prefetch_related(Prefetch("versions", queryset=DatasetVersion.objects.order_by("-number")))


@login_required
def dataset_list(request):
    form = DatasetForm(request.user, request.POST or None)
    if request.method == "POST" and form.is_valid():
        try:
            dataset = actions.create_dataset(
                request.user,
                name=form.cleaned_data["name"],
                description=form.cleaned_data["description"],
                group_id=form.cleaned_data["group"],
            )
        except DatasetError as exc:
            form.add_error(exc.field if exc.field in form.fields else None, exc.message)
        else:
            return redirect("datasets:detail", dataset.pk)
    datasets = list(_with_versions(own_datasets(request.user))[:500])
    return render(request, "datasets/list.html", {"datasets": datasets, "form": form})


# The dataset page lists this many files of its newest ready version (the API lists them all).
FILES_LISTED = 100


@login_required
def dataset_detail(request, pk: int):
    try:
        dataset = readable_dataset(request.user, pk)
    except DatasetError:
        raise Http404("No such dataset.") from None
    versions = list(dataset.versions.order_by("-number")[:200])
    open_version = next((v for v in versions if v.state == VersionState.UPLOADING), None)
    latest_ready = next((v for v in versions if v.state == VersionState.READY), None)
    allowed, used = quota_bytes(dataset), used_bytes(dataset)
    context = {
        "latest_ready": latest_ready,
        "latest_files": list(latest_ready.files.all()[:FILES_LISTED]) if latest_ready else [],
        "dataset": dataset,
        "versions": versions,
        # The versions table re-reads itself while an upload or a check is under way.
        "changing": any(v.state in (VersionState.UPLOADING, VersionState.VERIFYING) for v in versions),
        "open_version": open_version,
        "writable": may_write(request.user, dataset),
        # An admin deletes versions of a dataset listed for deletion (datasets/over_quota.py).
        "deletable": over_quota.may_delete_versions(request.user, dataset),
        "deletion_listed_on": over_quota.listed_on(dataset),
        "can_register": is_admin(request.user) and bool(settings.DATASET_IMPORT_ROOTS),
        "can_pin": is_admin(request.user),
        "import_roots": settings.DATASET_IMPORT_ROOTS,
        "quota_label": describe(allowed),
        "used_label": describe(used),
        "quota_refusal": quota_refusal(dataset),
        "over_quota": used > allowed,
    }
    return render(request, "datasets/detail.html", context)


@login_required
@role_required(Role.ADMIN)
def over_quota_page(request):
    """The admins' list: datasets whose owner stores more than the plan allows, in their grace
    period and past it (listed for deletion)."""
    now = timezone.now()

    def rows(datasets):
        return [
            {
                "dataset": dataset,
                "used": describe(used_bytes(dataset)),
                "quota": describe(quota_bytes(dataset)),
                "listed_on": over_quota.listed_on(dataset),
            }
            for dataset in datasets.order_by("over_quota_since", "pk")[:500]
        ]

    context = {"listed": rows(over_quota.listed_for_deletion(now)), "grace": rows(over_quota.in_grace(now))}
    return render(request, "datasets/over_quota.html", context)


@login_required
@require_POST
def register_version(request, pk: int):
    """Admins: a directory of the shared storage as the dataset's next version."""
    try:
        dataset = readable_dataset(request.user, pk)
    except DatasetError:
        raise Http404("No such dataset.") from None
    try:
        version = actions.register_version(dataset, request.user, path=request.POST.get("path", "").strip())
    except DatasetError as exc:
        messages.error(request, exc.message)
    else:
        messages.success(request, f"Version {version.number} is being copied from {version.source_path}.")
    return redirect("datasets:detail", pk=dataset.pk)


@login_required
@require_POST
def delete_version(request, pk: int, number: int):
    """A writer deletes a ready version (datasets.actions.delete_version says when it may not)."""
    try:
        dataset = readable_dataset(request.user, pk)
        version = dataset.versions.get(number=number)
    except (DatasetError, DatasetVersion.DoesNotExist):
        raise Http404("No such version.") from None
    try:
        actions.delete_version(version, request.user)
    except DatasetError as exc:
        messages.error(request, exc.message)
    else:
        messages.success(request, f"Version {number} is deleted; its {version.size_bytes:,} bytes are freed.")
    return redirect("datasets:detail", pk=dataset.pk)
