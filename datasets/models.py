"""Datasets (docs/datasets.md): named collections of files owned by a user or a group, kept as
immutable numbered versions. A version is written by resumable uploads (tus), one per file;
committing it checks every file's sha256 on disk, and only then is it `ready`. A version
that is not ready is never offered as data: later parts (node caches, job mounts) read only
ready versions."""

from __future__ import annotations

import uuid

from django.conf import settings
from django.core.validators import RegexValidator
from django.db import models
from django.db.models import Q

# Datasets will be mounted at /data/<name>: a name is one safe path component.
NAME = RegexValidator(
    r"^[A-Za-z0-9][A-Za-z0-9._-]{0,79}$",
    "1-80 characters: letters, digits, '.', '_' and '-', starting with a letter or digit.",
)
SHA256_HEX = RegexValidator(r"^[0-9a-f]{64}$", "64 lower-case hexadecimal digits.")


class Dataset(models.Model):
    # Exactly one owner, as invoices and credit accounts (groups.queries.owned_by).
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, null=True, blank=True, related_name="datasets"
    )
    group = models.ForeignKey("groups.Group", on_delete=models.PROTECT, null=True, blank=True, related_name="datasets")
    name = models.CharField(max_length=80, validators=[NAME])
    description = models.TextField(max_length=2000, blank=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)
    # Since when its owner stores more than their plan allows (a downgrade, a group's plan ended):
    # frozen, and listed for deletion DATASET_OVER_QUOTA_GRACE_DAYS later (datasets/over_quota.py).
    over_quota_since = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["name", "id"]
        constraints = [
            models.CheckConstraint(
                condition=Q(user__isnull=False, group__isnull=True) | Q(user__isnull=True, group__isnull=False),
                name="dataset_has_exactly_one_owner",
            ),
            models.UniqueConstraint(
                fields=["user", "name"], condition=Q(group__isnull=True), name="dataset_name_per_user"
            ),
            models.UniqueConstraint(
                fields=["group", "name"], condition=Q(user__isnull=True), name="dataset_name_per_group"
            ),
        ]

    def __str__(self):
        return self.name

    @property
    def owner_label(self) -> str:
        return f"group {self.group.slug}" if self.group_id else self.user.username


class VersionState(models.TextChoices):
    UPLOADING = "uploading"  # open: files are being uploaded
    VERIFYING = "verifying"  # committed: the worker reads every file back and checks its sha256
    READY = "ready"  # verified and immutable: the only state later parts use
    FAILED = "failed"  # a check failed or the upload was abandoned: `error` says why; its bytes are gone
    # Deleted by a writer of the dataset: its bytes are gone, its row, files and checksums stay
    # (jobs that ran on it name them); `error` says who and when.
    DELETED = "deleted"


# States that hold bytes of the owner's quota while not yet ready.
OPEN_STATES = (VersionState.UPLOADING, VersionState.VERIFYING)


class DatasetVersion(models.Model):
    dataset = models.ForeignKey(Dataset, on_delete=models.PROTECT, related_name="versions")
    number = models.PositiveIntegerField()
    state = models.CharField(max_length=16, choices=VersionState.choices, default=VersionState.UPLOADING)
    # Set when ready: the files' total, their count, and the sha256 of the sorted manifest
    # (datasets/manifest.py), which names the version's content in one value.
    size_bytes = models.PositiveBigIntegerField(default=0)
    file_count = models.PositiveIntegerField(default=0)
    sha256 = models.CharField(max_length=64, blank=True)
    error = models.TextField(blank=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)
    committed_at = models.DateTimeField(null=True, blank=True)
    ready_at = models.DateTimeField(null=True, blank=True)
    # Registered by an admin from the pool's shared storage (datasets/importing.py): the
    # directory the worker copied it from, instead of uploads.
    source_path = models.CharField(max_length=1024, blank=True)

    class Meta:
        ordering = ["dataset", "-number"]
        constraints = [
            models.UniqueConstraint(fields=["dataset", "number"], name="one_version_per_number"),
            # One version written at a time: a second would race the first for the next number.
            models.UniqueConstraint(
                fields=["dataset"],
                condition=Q(state__in=["uploading", "verifying"]),
                name="one_open_version_per_dataset",
            ),
            models.CheckConstraint(condition=Q(number__gte=1), name="version_numbers_start_at_one"),
            models.CheckConstraint(
                condition=~Q(state="ready") | Q(sha256__regex=r"^[0-9a-f]{64}$"), name="a_ready_version_has_its_sha256"
            ),
        ]

    def __str__(self):
        return f"{self.dataset.name} v{self.number}"


class DatasetFile(models.Model):
    """One file of a ready version, as verified on disk."""

    version = models.ForeignKey(DatasetVersion, on_delete=models.CASCADE, related_name="files")
    path = models.CharField(max_length=1024)
    size_bytes = models.PositiveBigIntegerField()
    sha256 = models.CharField(max_length=64, validators=[SHA256_HEX])

    class Meta:
        ordering = ["version", "path"]
        constraints = [models.UniqueConstraint(fields=["version", "path"], name="one_file_per_path")]

    def __str__(self):
        return self.path


class Upload(models.Model):
    """One file's resumable upload (a tus upload resource) into an open version. Its id, a
    random UUID, is in the upload's URL; its bytes are staged under that id alone, so a path a
    user chose never names a file until the version is verified."""

    class State(models.TextChoices):
        RECEIVING = "receiving"
        COMPLETE = "complete"  # every declared byte is here
        ABANDONED = "abandoned"  # deleted by the client (tus termination) or with its version

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    version = models.ForeignKey(DatasetVersion, on_delete=models.CASCADE, related_name="uploads")
    path = models.CharField(max_length=1024)
    length = models.PositiveBigIntegerField()
    offset = models.PositiveBigIntegerField(default=0)
    # What the client declared (Upload-Metadata sha256), checked when the version is committed.
    declared_sha256 = models.CharField(max_length=64, blank=True, validators=[SHA256_HEX])
    state = models.CharField(max_length=16, choices=State.choices, default=State.RECEIVING)
    # tus concatenation: a part of a file sent beside its other parts (its `path` is the file's,
    # for a client resuming them); a final upload joins complete parts, which are then abandoned.
    # A part is never a file of the version.
    partial = models.BooleanField(default=False)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["version", "path"]
        constraints = [
            models.UniqueConstraint(
                fields=["version", "path"],
                condition=~Q(state="abandoned") & Q(partial=False),
                name="one_live_upload_per_path",
            ),
            models.CheckConstraint(condition=Q(offset__lte=models.F("length")), name="upload_offset_within_length"),
        ]

    def __str__(self):
        return f"{self.path} ({self.offset}/{self.length})"


class NodeCopy(models.Model):
    """A ready version's verified copy in one node's NVMe cache, as that node's tool said
    (deploy/node/gpupool-dataset-cache: the lines a staging job prints, jobs/dataset_staging.py).
    Kept in step with the node's Slurm feature `ds_<version id>` (datasets/actions/node_cache.py), which
    jobs on that version prefer."""

    node = models.CharField(max_length=64)
    version = models.ForeignKey(DatasetVersion, on_delete=models.CASCADE, related_name="node_copies")
    size_bytes = models.PositiveBigIntegerField(default=0)
    # When a job last staged it there (the node evicts least recently used first).
    last_used_at = models.DateTimeField()

    class Meta:
        ordering = ["node", "-last_used_at"]
        constraints = [models.UniqueConstraint(fields=["node", "version"], name="one_copy_per_node_and_version")]

    def __str__(self):
        return f"{self.version} on {self.node}"


class NodePin(models.Model):
    """An admin's "keep this version on that node": a staging job copies it there ahead of any
    user's job (jobs/actions.py), and the node's tool never evicts it while the pin stands
    (DATASET_STORE/pins/<node>, which the tool reads)."""

    node = models.CharField(max_length=64)
    version = models.ForeignKey(DatasetVersion, on_delete=models.CASCADE, related_name="node_pins")
    pinned_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)
    # Its staging jobs are the admin's pinned jobs that mount the version on the node (jobs/actions.py).

    class Meta:
        ordering = ["node", "version"]
        constraints = [models.UniqueConstraint(fields=["node", "version"], name="one_pin_per_node_and_version")]

    def __str__(self):
        return f"{self.version} pinned on {self.node}"
