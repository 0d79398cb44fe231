"""GET /api/v1/datasets/{id}/versions/{n}/files/{path}: one file of a ready version, streamed.

Who may: whoever may read the dataset (datasets.queries.readable_dataset; anyone else gets the
404 of a file that does not exist). Only files the version's manifest lists (a DatasetFile row),
opened in the store one component at a time without following links. At most the file's
recorded size is sent, so a file that changed on disk cannot make the answer longer than its
Content-Length; the sha256 is in `Digest` (RFC 3230) and the ETag.

The body streams a block at a time (foundation/file_streams.py)."""

from __future__ import annotations

import base64

from django.http import Http404, StreamingHttpResponse

from datasets import storage
from datasets.models import DatasetFile, VersionState
from datasets.queries import DatasetError
from foundation import file_streams


def file_response(request, version, path: str) -> StreamingHttpResponse:
    """The file, or Http404 (not ready, not in the manifest, missing on disk)."""
    if version.state != VersionState.READY:
        raise Http404("Only a ready version's files can be downloaded.")
    row = DatasetFile.objects.filter(version=version, path=path).first()
    if row is None:
        raise Http404("No such file in this version.")
    try:
        fd = storage.open_version_file(version.pk, row.path)
    except storage.StorageError as exc:
        raise DatasetError("file", "The file is missing from the store; an admin can see why.", 404) from exc
    response = file_streams.file_response(request, fd, row.size_bytes, filename=row.path.rsplit("/", 1)[-1])
    response["Digest"] = "sha-256=" + base64.b64encode(bytes.fromhex(row.sha256)).decode()
    response["ETag"] = f'"{row.sha256}"'
    return response
