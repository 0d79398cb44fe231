"""The pages of a job's files: a folder's listing, a file's preview (text or image), its bytes
(jobs/files.py reads them; the API has the same in jobs/api/files.py). The owner's only."""

import os

from django.contrib.auth.decorators import login_required
from django.http import Http404
from django.shortcuts import get_object_or_404, render

from foundation import file_streams
from jobs import files
from jobs.models import Job


def _own(request, pk: int) -> Job:
    return get_object_or_404(Job, pk=pk, owner=request.user)


def _crumbs(path: str) -> list[tuple[str, str]]:
    """(name, path) of each folder from the job's directory down to `path`."""
    parts = [part for part in path.split("/") if part]
    return [(part, "/".join(parts[: index + 1])) for index, part in enumerate(parts)]


def _refused(request, job: Job, exc: files.JobFilesError):
    return render(request, "jobs/files.html", {"job": job, "error": exc.message, "crumbs": []}, status=exc.status)


@login_required
def job_files(request, pk: int):
    job = _own(request, pk)
    try:
        listing = files.list_files(job, request.GET.get("path"))
    except files.JobFilesError as exc:
        return _refused(request, job, exc)
    rows = [(entry, files.preview_kind(entry.name)) for entry in listing.entries]
    return render(
        request,
        "jobs/files.html",
        {"job": job, "listing": listing, "rows": rows, "crumbs": _crumbs(listing.path), "limit": files.MAX_ENTRIES},
    )


@login_required
def job_file_view(request, pk: int, file_path: str):
    job = _own(request, pk)
    kind = files.preview_kind(file_path)
    context = {"job": job, "path": file_path, "kind": kind, "crumbs": _crumbs(file_path)[:-1]}
    try:
        if kind == "text":
            context["text"], context["longer"] = files.read_preview(job, file_path)
        else:
            fd, size, _name = files.open_file(job, file_path)
            os.close(fd)
            context["size"] = size
    except files.JobFilesError as exc:
        return _refused(request, job, exc)
    context["preview_kb"] = files.PREVIEW_BYTES // 1024
    return render(request, "jobs/file_view.html", context)


@login_required
def job_file_raw(request, pk: int, file_path: str):
    """The file's bytes: an image inline (for its preview), anything else as a download."""
    job = _own(request, pk)
    try:
        fd, size, name = files.open_file(job, file_path)
    except files.JobFilesError as exc:
        raise Http404(exc.message) from None
    image = files.image_type(name) if "download" not in request.GET else None
    response = file_streams.file_response(
        request, fd, size, filename=name, content_type=image or "application/octet-stream", inline=image is not None
    )
    response["X-Content-Type-Options"] = "nosniff"
    # A job wrote these bytes: shown as an image, never run as a page of the portal's.
    response["Content-Security-Policy"] = "default-src 'none'; sandbox"
    return response


@login_required
def job_folder_archive(request, pk: int):
    job = _own(request, pk)
    try:
        chunks, name = files.archive(job, request.GET.get("path"))
    except files.JobFilesError as exc:
        return _refused(request, job, exc)
    return file_streams.stream_response(request, chunks, filename=name, content_type="application/zip")
