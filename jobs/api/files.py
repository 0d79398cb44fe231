"""`GET /api/v1/jobs/{id}/files/?path=`: what a job wrote, listed; `GET /api/v1/jobs/{id}/files/{path}`:
one file, streamed (jobs/files.py reads them). The caller's own jobs only: another's is a 404."""

from django.http import Http404
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import serializers
from rest_framework.response import Response

from foundation import file_streams
from foundation.api.views import RefusingAPIView
from jobs import files
from jobs.api.schema import errors
from jobs.models import Job


class FileEntrySerializer(serializers.Serializer):
    name = serializers.CharField()
    path = serializers.CharField(help_text="Inside the job's directory: what `path` and the download take")
    kind = serializers.ChoiceField(
        choices=["file", "directory", "link", "other"], help_text="A link is listed, never followed"
    )
    size = serializers.IntegerField(help_text="Bytes")
    modified = serializers.DateTimeField()


class ListingSerializer(serializers.Serializer):
    path = serializers.CharField(allow_blank=True, help_text="The folder listed; empty: the job's directory")
    entries = FileEntrySerializer(many=True, help_text="Folders first, then by name")
    truncated = serializers.BooleanField(help_text=f"More than {files.MAX_ENTRIES} entries: the first are listed")


class JobFilesView(RefusingAPIView):
    refusals = (files.JobFilesError,)

    def refuse(self, exc):
        body = {"detail": exc.message}
        if exc.status == 400:
            body["errors"] = {"path": [exc.message]}
        return Response(body, status=exc.status)

    def own_job(self, request, pk: int) -> Job:
        job = Job.objects.filter(pk=pk, owner=request.user).first()
        if job is None:
            raise Http404
        return job


class JobFileListView(JobFilesView):
    @extend_schema(
        operation_id="jobs_files_list",
        summary="The files a job wrote: its directory, or a folder in it",
        parameters=[OpenApiParameter("path", str, description="A folder inside the job's directory; default: itself")],
        responses={200: ListingSerializer, **errors(400, 401, 404)},
        tags=["jobs"],
    )
    def get(self, request, pk: int):
        listing = files.list_files(self.own_job(request, pk), request.query_params.get("path"))
        return Response(ListingSerializer(listing).data)


class JobFileDownloadView(JobFilesView):
    @extend_schema(
        operation_id="jobs_files_download",
        summary="One file a job wrote, streamed as it was when the download began",
        responses={
            (200, "application/octet-stream"): OpenApiResponse(OpenApiTypes.BINARY, description="The file"),
            **errors(400, 401, 404),
        },
        tags=["jobs"],
    )
    def get(self, request, pk: int, file_path: str):
        fd, size, name = files.open_file(self.own_job(request, pk), file_path)
        return file_streams.file_response(request, fd, size, filename=name)


class JobFolderArchiveView(JobFilesView):
    @extend_schema(
        operation_id="jobs_files_archive",
        summary="A folder a job wrote (default: its whole directory) as a zip, made while it is sent",
        parameters=[OpenApiParameter("path", str, description="A folder inside the job's directory; default: itself")],
        responses={
            (200, "application/zip"): OpenApiResponse(OpenApiTypes.BINARY, description="The folder's files"),
            **errors(400, 401, 404),
        },
        tags=["jobs"],
    )
    def get(self, request, pk: int):
        chunks, name = files.archive(self.own_job(request, pk), request.query_params.get("path"))
        return file_streams.stream_response(request, chunks, filename=name, content_type="application/zip")
