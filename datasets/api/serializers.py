"""The datasets API's bodies. Input fields take their JSON type only ("2" is not a group id):
a client that sends a string where a number belongs hears it rather than has it coerced."""

from __future__ import annotations

from django.core.validators import RegexValidator
from django.urls import reverse
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from datasets.models import Dataset, DatasetFile, DatasetVersion, Upload

# A ready version's detail lists at most this many files (the rest: `files_truncated`).
MAX_LISTED_FILES = 1000


class StrictCharField(serializers.CharField):
    default_error_messages = {"invalid": "Must be a string."}

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        # DRF refuses NUL characters; the schema says so too (a pattern), so clients know.
        self.validators.append(RegexValidator(r"^[^\x00]*$", "Null characters are not allowed."))

    def to_internal_value(self, data):
        if not isinstance(data, str):
            self.fail("invalid")
        return super().to_internal_value(data)


class StrictIntegerField(serializers.IntegerField):
    default_error_messages = {"invalid": "Must be a whole number (a JSON number, not a string)."}

    def to_internal_value(self, data):
        if isinstance(data, bool) or not isinstance(data, int):
            self.fail("invalid")
        return super().to_internal_value(data)


class DatasetInputSerializer(serializers.Serializer):
    name = StrictCharField(max_length=80, help_text="Letters, digits, '.', '_', '-'; later mounted at /data/<name>")
    description = StrictCharField(max_length=2000, required=False, allow_blank=True, default="")
    group = StrictIntegerField(
        required=False, allow_null=True, default=None, min_value=1, help_text="A group you are a member of"
    )


class RegisterInputSerializer(serializers.Serializer):
    path = StrictCharField(
        min_length=1,
        max_length=1024,
        help_text="An absolute directory under the pool's DATASET_IMPORT_ROOTS; every regular file under it is "
        "copied (no symbolic links or special files may be in it)",
    )


class VersionSummarySerializer(serializers.ModelSerializer):
    id = serializers.IntegerField(read_only=True, help_text="What a job's `datasets` lists to mount this version")

    class Meta:
        model = DatasetVersion
        fields = ["id", "number", "state", "size_bytes", "file_count", "sha256", "error", "created_at", "ready_at"]
        read_only_fields = fields


class DatasetSerializer(serializers.ModelSerializer):
    owner_user = serializers.SerializerMethodField(help_text="The owning user's name, or null for a group's dataset")
    owner_group = serializers.SerializerMethodField(help_text="The owning group's id, or null for a user's dataset")
    versions = VersionSummarySerializer(many=True, read_only=True)

    class Meta:
        model = Dataset
        fields = ["id", "name", "description", "owner_user", "owner_group", "created_at", "versions"]
        read_only_fields = fields

    def get_owner_user(self, dataset) -> str | None:
        return dataset.user.username if dataset.user_id else None

    def get_owner_group(self, dataset) -> int | None:
        return dataset.group_id


class FileSerializer(serializers.ModelSerializer):
    class Meta:
        model = DatasetFile
        fields = ["path", "size_bytes", "sha256"]
        read_only_fields = fields


def upload_url(upload: Upload) -> str:
    version = upload.version
    return reverse(
        "api-dataset-upload",
        kwargs={"pk": version.dataset_id, "number": version.number, "upload_id": upload.pk},
    )


class UploadSerializer(serializers.ModelSerializer):
    url = serializers.SerializerMethodField(help_text="The upload's tus URL (HEAD for its offset, PATCH for bytes)")

    class Meta:
        model = Upload
        fields = ["id", "path", "length", "offset", "state", "declared_sha256", "partial", "url"]
        read_only_fields = fields

    def get_url(self, upload) -> str:
        return upload_url(upload)


class VersionSerializer(VersionSummarySerializer):
    dataset = serializers.IntegerField(source="dataset_id", read_only=True)
    files = serializers.SerializerMethodField(help_text=f"A ready version's files, the first {MAX_LISTED_FILES}")
    files_truncated = serializers.SerializerMethodField()
    uploads = serializers.SerializerMethodField(help_text="An open version's uploads, to resume them")

    class Meta(VersionSummarySerializer.Meta):
        fields = [
            "dataset",
            *VersionSummarySerializer.Meta.fields,
            "committed_at",
            "source_path",
            "files",
            "files_truncated",
            "uploads",
        ]
        read_only_fields = fields

    @extend_schema_field(FileSerializer(many=True))
    def get_files(self, version):
        return FileSerializer(version.files.all()[:MAX_LISTED_FILES], many=True).data

    def get_files_truncated(self, version) -> bool:
        return version.file_count > MAX_LISTED_FILES

    @extend_schema_field(UploadSerializer(many=True))
    def get_uploads(self, version):
        rows = version.uploads.exclude(state=Upload.State.ABANDONED).select_related("version")
        return UploadSerializer(rows[: 10 * MAX_LISTED_FILES], many=True).data
