"""The Datasets pages: the user's and their groups' datasets, a form to create one, and a
dataset's versions with the browser's resumable upload (static/js/datasets_upload.js, which
speaks the tus API: /api/v1/datasets/...)."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.db.models import Prefetch
from django.http import Http404
from django.shortcuts import redirect, render

from datasets import actions
from datasets.forms import DatasetForm
from datasets.models import DatasetVersion, VersionState
from datasets.queries import DatasetError, may_write, own_datasets, readable_dataset
from datasets.quota import describe, quota_bytes, used_bytes


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


@login_required
def dataset_detail(request, pk: int):
    try:
        dataset = readable_dataset(request.user, pk)
    except DatasetError:
        raise Http404("No such dataset.") from None
    versions = list(dataset.versions.order_by("-number")[:200])
    open_version = next((v for v in versions if v.state == VersionState.UPLOADING), None)
    context = {
        "dataset": dataset,
        "versions": versions,
        "open_version": open_version,
        "writable": may_write(request.user, dataset),
        "quota_label": describe(quota_bytes(dataset)),
        "used_label": describe(used_bytes(dataset)),
    }
    return render(request, "datasets/detail.html", context)
