"""/api/v1/datasets/: datasets, their versions, and the tus 1.0 upload of a version's files
(core, creation and checksum; docs/datasets.md walks through it). Every write goes through
datasets.actions; this module reads headers and bodies, picks the rows the caller may act on
and says the outcome.

Who gets what: a dataset the caller may not read (not theirs, not their group's; admins read
all) is a 404 on every path under it, its existence not theirs to learn; one they can read
but not write (an admin's reading) is a 403 on writes.

Implemented here rather than with a tus library: the server side is four small handlers, and
the quota check, the owner's locks and the path rules must run inside this project's actions
before any byte is accepted, which drf-tus's own models and storage would have stood apart from."""

from __future__ import annotations

from django.db.models import Prefetch
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework.renderers import JSONRenderer
from rest_framework.response import Response

from datasets import actions
from datasets.api import download, tus
from datasets.api.serializers import (
    DatasetInputSerializer,
    DatasetSerializer,
    RegisterInputSerializer,
    UploadSerializer,
    VersionSerializer,
    upload_url,
)
from datasets.models import DatasetVersion, Upload
from datasets.queries import DatasetError, own_datasets, readable_dataset
from foundation.api.errors import error_responses
from foundation.api.renderers import OctetStreamRenderer
from foundation.api.views import RefusingAPIView

ERROR_DESCRIPTIONS = {
    400: "Bad input: `errors` names each field (or header) and what is wrong with it",
    401: "No credentials, or an unknown or revoked token",
    403: "Visible but not yours to write (an admin reading another's dataset), or (with the session cookie) no "
    "CSRF token",
    404: "No such dataset, version or upload among those the caller may read (their own, their groups')",
    409: "Not possible in this state: a version still open, an upload at another offset, a path already there, a "
    "file not fully uploaded",
    412: "Tus-Resumable is missing or not 1.0.0",
    413: "Over the owner's NVMe quota (before any byte is accepted), a body longer than the upload's rest, or a body "
    "larger than the API accepts",
    415: "The body is not of the declared type (JSON; a tus PATCH: application/offset+octet-stream)",
    460: "The chunk's bytes do not match Upload-Checksum (tus checksum extension); the offset did not move",
}
TAGS = ["datasets"]
TUS_RESUMABLE = OpenApiParameter(
    "Tus-Resumable",
    OpenApiTypes.STR,
    location=OpenApiParameter.HEADER,
    required=True,
    enum=[tus.VERSION],
    description="The tus protocol version",
)
UPLOAD_OFFSET_OUT = OpenApiParameter(
    "Upload-Offset", OpenApiTypes.INT, location=OpenApiParameter.HEADER, response=[204], description="Bytes received"
)


def errors(*codes: int) -> dict[int, OpenApiResponse]:
    return error_responses(ERROR_DESCRIPTIONS, *codes)


def refused(exc: DatasetError | tus.TusError) -> Response:
    body = {"detail": exc.message}
    if exc.status in (400, 409, 413, 460):
        body["errors"] = {exc.field: [exc.message]}
    headers = {"Tus-Version": tus.VERSION} if exc.status == 412 else None
    return Response(body, status=exc.status, headers=headers)


class DatasetAPIView(RefusingAPIView):
    """The datasets' API views: a DatasetError or a tus refusal is the answer, in one shape."""

    refusals = (DatasetError, tus.TusError)

    def refuse(self, exc):
        return refused(exc)


def _datasets(rows):
    return rows.prefetch_related(Prefetch("versions", queryset=DatasetVersion.objects.order_by("-number")))


class DatasetListView(DatasetAPIView):
    @extend_schema(
        operation_id="datasets_list",
        summary="The caller's datasets and their groups' datasets, with their versions",
        responses={200: DatasetSerializer(many=True), **errors(401)},
        tags=TAGS,
    )
    def get(self, request):
        return Response(DatasetSerializer(_datasets(own_datasets(request.user)), many=True).data)

    @extend_schema(
        operation_id="datasets_create",
        summary="Create a dataset (of the caller, or of a group they are a member of); its versions are uploaded next",
        request=DatasetInputSerializer,
        responses={201: DatasetSerializer, **errors(400, 401, 409, 413, 415)},
        tags=TAGS,
    )
    def post(self, request):
        body = DatasetInputSerializer(data=request.data)
        if not body.is_valid():
            field_errors = {name: [str(message) for message in found] for name, found in body.errors.items()}
            return Response({"detail": "The dataset is invalid.", "errors": field_errors}, status=400)
        values = body.validated_data
        dataset = actions.create_dataset(
            request.user, name=values["name"], description=values["description"], group_id=values["group"]
        )
        return Response(DatasetSerializer(_datasets(own_datasets(request.user)).get(pk=dataset.pk)).data, status=201)


class DatasetDetailView(DatasetAPIView):
    @extend_schema(
        operation_id="datasets_retrieve",
        summary="One dataset with its versions",
        responses={200: DatasetSerializer, **errors(401, 404)},
        tags=TAGS,
    )
    def get(self, request, pk):
        dataset = readable_dataset(request.user, pk)
        dataset = _datasets(type(dataset).objects.select_related("user", "group")).get(pk=dataset.pk)
        return Response(DatasetSerializer(dataset).data)


def _version(request, pk, number) -> DatasetVersion:
    dataset = readable_dataset(request.user, pk)
    version = DatasetVersion.objects.select_related("dataset").filter(dataset=dataset, number=number).first()
    if version is None:
        raise DatasetError("version", "No such version.", 404)
    return version


class VersionOpenView(DatasetAPIView):
    @extend_schema(
        operation_id="datasets_version_open",
        summary="Open the dataset's next version for uploads (one open version at a time)",
        request=None,
        responses={201: VersionSerializer, **errors(401, 403, 404, 409)},
        tags=TAGS,
    )
    def post(self, request, pk):
        version = actions.open_version(readable_dataset(request.user, pk), request.user)
        return Response(VersionSerializer(version).data, status=201)


class VersionRegisterView(DatasetAPIView):
    @extend_schema(
        operation_id="datasets_version_register",
        summary="Admins: register a directory of the pool's shared storage as the next version",
        description=(
            "Answered 202 with the version `verifying`: a worker scans the directory (no links, no special files, "
            "the upload's path rules), checks the owner's quota, copies and hashes every file; poll the version "
            "until `ready`, or `failed` with `error`. 403 for anyone but an admin."
        ),
        request=RegisterInputSerializer,
        responses={202: VersionSerializer, **errors(400, 401, 403, 404, 409)},
        tags=TAGS,
    )
    def post(self, request, pk):
        body = RegisterInputSerializer(data=request.data)
        if not body.is_valid():
            return Response({"detail": "The request is invalid.", "errors": body.errors}, status=400)
        dataset = readable_dataset(request.user, pk)
        version = actions.register_version(dataset, request.user, path=body.validated_data["path"])
        return Response(VersionSerializer(version).data, status=202)


class VersionDetailView(DatasetAPIView):
    @extend_schema(
        operation_id="datasets_version_retrieve",
        summary="One version: its state, checksum and files (ready), or its uploads and their offsets (open)",
        responses={200: VersionSerializer, **errors(401, 404)},
        tags=TAGS,
    )
    def get(self, request, pk, number):
        version = _version(request, pk, number)
        return Response(VersionSerializer(version).data)

    @extend_schema(
        operation_id="datasets_version_delete",
        summary="Delete a ready version: its files are removed and its bytes leave the owner's quota",
        description=(
            "Answered 200 with the version in state `deleted` (its row, checksum and file list stay: jobs that ran "
            "on it name them; `error` says who deleted it and when). 409, nothing changed, while a queued or running "
            "job mounts it, while an admin has it pinned to nodes, or when it is not ready."
        ),
        request=None,
        responses={200: VersionSerializer, **errors(401, 403, 404, 409)},
        tags=TAGS,
    )
    def delete(self, request, pk, number):
        version = actions.delete_version(_version(request, pk, number), request.user)
        return Response(VersionSerializer(version).data)


class VersionFileView(DatasetAPIView):
    renderer_classes = [JSONRenderer, OctetStreamRenderer]

    @extend_schema(
        operation_id="datasets_version_file",
        summary="Download one file of a ready version",
        description=(
            "The file's bytes (`application/octet-stream`, streamed), `Content-Length` its size, `Digest` "
            "(`sha-256=<base64>`) and `ETag` its sha256. `path` is the file's path in the version, as `files` lists "
            "it. 404 for a version that is not ready or a path it does not hold."
        ),
        responses={
            (200, "application/octet-stream"): OpenApiResponse(OpenApiTypes.BINARY, description="The file"),
            **errors(400, 401, 404),  # 400: an empty `format`
        },
        tags=TAGS,
    )
    def get(self, request, pk, number, file_path):
        return download.file_response(request, _version(request, pk, number), file_path)


class VersionCommitView(DatasetAPIView):
    @extend_schema(
        operation_id="datasets_version_commit",
        summary="Commit an open version: every file's sha256 is checked on disk by a worker, then it is ready",
        description=(
            "Answered 202 with the version in state `verifying` (poll the version until `ready`, or `failed` with "
            "`error`). Refused with 409 while a file is not fully uploaded. A version already verifying is "
            "checked again (idempotent)."
        ),
        request=None,
        responses={202: VersionSerializer, **errors(401, 403, 404, 409)},
        tags=TAGS,
    )
    def post(self, request, pk, number):
        version = actions.commit_version(_version(request, pk, number), request.user)
        return Response(VersionSerializer(version).data, status=202)


class VersionAbandonView(DatasetAPIView):
    @extend_schema(
        operation_id="datasets_version_abandon",
        summary="Abandon an open version: it becomes failed and its uploaded bytes are removed",
        request=None,
        responses={200: VersionSerializer, **errors(401, 403, 404, 409)},
        tags=TAGS,
    )
    def post(self, request, pk, number):
        version = actions.abandon_version(_version(request, pk, number), request.user)
        return Response(VersionSerializer(version).data)


class TusView(DatasetAPIView):
    """Every tus answer says the protocol version; OPTIONS says what the server supports."""

    def finalize_response(self, request, response, *args, **kwargs):
        response = super().finalize_response(request, response, *args, **kwargs)
        response["Tus-Resumable"] = tus.VERSION
        response["Cache-Control"] = "no-store"
        return response

    def options(self, request, *args, **kwargs):
        return Response(
            status=204,
            headers={
                "Tus-Version": tus.VERSION,
                "Tus-Extension": tus.EXTENSIONS,
                "Tus-Checksum-Algorithm": ",".join(tus.CHECKSUM_ALGORITHMS),
            },
        )


class UploadCreateView(TusView):
    @extend_schema(
        operation_id="datasets_upload_create",
        summary="tus creation: declare one file of an open version; its quota is checked before any byte",
        description=(
            "`Upload-Metadata` carries `path` (required: the file's path in the version, e.g. `train/0001.jpg`) and "
            "`sha256` (optional but recommended: the whole file's hex digest, checked when the version is "
            "committed), each base64-encoded as tus says. Answered 201 with `Location`: the upload's URL, to which "
            "the bytes go by PATCH."
        ),
        request=None,
        parameters=[
            TUS_RESUMABLE,
            OpenApiParameter(
                "Upload-Length",
                OpenApiTypes.INT,
                location=OpenApiParameter.HEADER,
                description="The file's (or the part's) size in bytes; required except for a final concatenation",
            ),
            OpenApiParameter(
                "Upload-Metadata",
                OpenApiTypes.STR,
                location=OpenApiParameter.HEADER,
                description="`path <base64>,sha256 <base64>`; required except for a part",
            ),
            OpenApiParameter(
                "Upload-Concat",
                OpenApiTypes.STR,
                location=OpenApiParameter.HEADER,
                pattern=r"^(partial|final;.*\S.*)$",
                description=(
                    "tus concatenation: `partial` for one part of a file sent beside the others (several "
                    "connections at once), or `final;<part URL> <part URL>...` to join complete parts, in that "
                    "order, into the file named by Upload-Metadata (answered at once: the file is complete)"
                ),
            ),
            OpenApiParameter(
                "Location",
                OpenApiTypes.URI,
                location=OpenApiParameter.HEADER,
                response=[201],
                description="The upload's URL",
            ),
        ],
        responses={201: UploadSerializer, **errors(400, 401, 403, 404, 409, 412, 413)},
        tags=TAGS,
    )
    def post(self, request, pk, number):
        tus.check_version(request.headers.get("Tus-Resumable"))
        version = _version(request, pk, number)
        concat, part_ids = tus.read_concat(request.headers.get("Upload-Concat"))
        metadata = tus.read_metadata(request.headers.get("Upload-Metadata"))
        declared = tus.read_declared_sha256(metadata)
        if "path" not in metadata and concat != "partial":
            raise tus.TusError("Upload-Metadata must name the file's `path`.", 400, "Upload-Metadata")
        if concat == "final":
            upload = actions.concatenate_parts(
                version, request.user, path=metadata["path"], part_ids=part_ids, declared_sha256=declared
            )
        else:
            length = tus.read_number(request.headers.get("Upload-Length"), "Upload-Length")
            upload = actions.create_upload(
                version,
                request.user,
                path=metadata.get("path", ""),
                length=length,
                declared_sha256=declared,
                partial=concat == "partial",
            )
        location = request.build_absolute_uri(upload_url(upload))
        return Response(UploadSerializer(upload).data, status=201, headers={"Location": location})


class UploadView(TusView):
    def _upload(self, request, pk, number, upload_id) -> Upload:
        version = _version(request, pk, number)
        upload = (
            Upload.objects.select_related("version__dataset")
            .filter(pk=upload_id, version=version)
            .exclude(state=Upload.State.ABANDONED)
            .first()
        )
        if upload is None:
            raise DatasetError("upload", "No such upload.", 404)
        return upload

    def _writable_upload(self, request, pk, number, upload_id) -> Upload:
        """The upload, for a caller who may write to its dataset, in one query (a PATCH is sent
        every 8 MiB: bench/datasets.py); anything else goes the long way to its precise refusal."""
        found = (
            Upload.objects.select_related("version__dataset")
            .filter(pk=upload_id, version__number=number, version__dataset_id=pk)
            .filter(version__dataset__in=own_datasets(request.user))
            .exclude(state=Upload.State.ABANDONED)
            .first()
        )
        if found is None:
            found = self._upload(request, pk, number, upload_id)
            actions.check_writer(found.version.dataset, request.user)
        return found

    def head(self, request, pk, number, upload_id):
        """tus: where the upload stands (Upload-Offset) and its length. Not in the OpenAPI
        document (which leaves HEAD out): docs/datasets.md describes it."""
        tus.check_version(request.headers.get("Tus-Resumable"))
        upload = self._upload(request, pk, number, upload_id)
        headers = {"Upload-Offset": str(upload.offset), "Upload-Length": str(upload.length)}
        if upload.partial:
            headers["Upload-Concat"] = "partial"
        return Response(status=200, headers=headers)

    @extend_schema(
        operation_id="datasets_upload_patch",
        summary="tus core: bytes of one file at Upload-Offset (at most 8 MiB a request); answered with the new offset",
        description=(
            "The body is raw bytes (`Content-Type: application/offset+octet-stream`), written at `Upload-Offset`, "
            "which must equal the upload's offset (HEAD tells it; 409 otherwise). Nothing past the declared length "
            "is accepted (413). With `Upload-Checksum: <sha1|sha256|md5> <base64 digest>` the chunk is checked and "
            "refused with 460 on a mismatch."
        ),
        request={tus.OFFSET_MEDIA_TYPE: OpenApiTypes.BINARY},
        parameters=[
            TUS_RESUMABLE,
            OpenApiParameter(
                "Upload-Offset",
                OpenApiTypes.INT,
                location=OpenApiParameter.HEADER,
                required=True,
                description="Where these bytes start",
            ),
            OpenApiParameter(
                "Upload-Checksum",
                OpenApiTypes.STR,
                location=OpenApiParameter.HEADER,
                description="`<algorithm> <base64 digest>` of this request's body",
            ),
            UPLOAD_OFFSET_OUT,
        ],
        responses={
            204: OpenApiResponse(description="Written; Upload-Offset is the new offset"),
            **errors(400, 401, 403, 404, 409, 412, 413, 415, 460),
        },
        tags=TAGS,
    )
    def patch(self, request, pk, number, upload_id):
        tus.check_version(request.headers.get("Tus-Resumable"))
        upload = self._writable_upload(request, pk, number, upload_id)
        if request.content_type.split(";")[0].strip().lower() != tus.OFFSET_MEDIA_TYPE:
            raise tus.TusError(f"Send the bytes as {tus.OFFSET_MEDIA_TYPE}.", 415, "Content-Type")
        offset = tus.read_number(request.headers.get("Upload-Offset"), "Upload-Offset")
        checksum = tus.read_checksum(request.headers.get("Upload-Checksum"))
        declared = request.headers.get("Content-Length")
        if declared and declared.isdigit() and offset + int(declared) > upload.length:
            raise tus.TusError("The body is longer than the rest of the upload.", 413, "Content-Length")
        new_offset = actions.receive_chunk(
            upload, request.user, offset=offset, stream=request._request, checksum=checksum, writer_checked=True
        )
        return Response(status=204, headers={"Upload-Offset": str(new_offset)})
