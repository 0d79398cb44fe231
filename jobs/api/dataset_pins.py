"""Admins' pins of dataset versions to nodes over the API (jobs/actions.py does the work):

    GET    /api/v1/datasets/{id}/versions/{n}/pins/         the version's pins and their staging jobs
    POST   /api/v1/datasets/{id}/versions/{n}/pins/         {"nodes": [...]}: pin and stage there
    DELETE /api/v1/datasets/{id}/versions/{n}/pins/{node}   unpin (the copy stays, evictable)

Admins only: anyone else is answered 403 and learns nothing of the dataset."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.exceptions import PermissionDenied
from rest_framework.permissions import BasePermission
from rest_framework.response import Response
from rest_framework.views import APIView

from accounts.access import is_admin
from datasets.api.views import refused
from datasets.models import DatasetVersion, NodePin
from datasets.queries import DatasetError
from foundation.api.errors import error_responses
from jobs import actions as job_actions

ERRORS = {
    400: "Bad input: `errors` names the field and what is wrong (no node, an unknown node, one without NVMe, "
    "pins beyond a node's cache, a version not ready)",
    401: "No credentials, or an unknown or revoked token",
    403: "Not an admin (or, with the session cookie, no CSRF token)",
    404: "No such dataset version, or no pin of it on that node",
    415: "The body is not JSON",
}
TAGS = ["datasets"]


class IsAdmin(BasePermission):
    def has_permission(self, request, view):
        if not is_admin(request.user):
            raise PermissionDenied("Pinning datasets to nodes is for admins.")
        return True


class PinSerializer(serializers.ModelSerializer):
    pinned_by = serializers.CharField(source="pinned_by.username", read_only=True)
    staging_job = serializers.SerializerMethodField(help_text="The portal job that copies it there: id and state")

    class Meta:
        model = NodePin
        fields = ["node", "version", "pinned_by", "created_at", "staging_job"]
        read_only_fields = fields

    def get_staging_job(self, pin) -> dict | None:
        job = job_actions.staging_job(pin.version, pin.node)
        return {"id": job.pk, "state": job.state, "error": job.error} if job else None


class PinRequestSerializer(serializers.Serializer):
    nodes = serializers.ListField(child=serializers.CharField(max_length=64, min_length=1), min_length=1, max_length=64)


def _version(pk: int, number: int) -> DatasetVersion:
    version = DatasetVersion.objects.select_related("dataset").filter(dataset_id=pk, number=number).first()
    if version is None:
        raise DatasetError("version", "No such version.", 404)
    return version


class VersionPinsView(APIView):
    permission_classes = [IsAdmin]

    @extend_schema(
        operation_id="datasets_version_pins_list",
        summary="A version's pins to nodes, each with its staging job (admins)",
        responses={200: PinSerializer(many=True), **error_responses(ERRORS, 401, 403, 404)},
        tags=TAGS,
    )
    def get(self, request, pk: int, number: int):
        try:
            version = _version(pk, number)
        except DatasetError as exc:
            return refused(exc)
        pins = NodePin.objects.filter(version=version).select_related("pinned_by", "version").order_by("node")
        return Response(PinSerializer(pins, many=True).data)

    @extend_schema(
        operation_id="datasets_version_pins_create",
        summary="Pin a ready version to nodes: a staging job per node copies it ahead, never evicted while pinned",
        request=PinRequestSerializer,
        responses={201: PinSerializer(many=True), **error_responses(ERRORS, 400, 401, 403, 404, 415)},
        tags=TAGS,
    )
    def post(self, request, pk: int, number: int):
        body = PinRequestSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        try:
            version = _version(pk, number)
            pins = job_actions.pin_version(request.user, version, body.validated_data["nodes"])
        except DatasetError as exc:
            return refused(exc)
        return Response(PinSerializer(pins, many=True).data, status=201)


class VersionPinView(APIView):
    permission_classes = [IsAdmin]

    @extend_schema(
        operation_id="datasets_version_pin_delete",
        summary="Unpin a version from a node (its copy stays until the cache needs the room)",
        responses={204: None, **error_responses(ERRORS, 401, 403, 404)},
        tags=TAGS,
    )
    def delete(self, request, pk: int, number: int, node: str):
        try:
            version = _version(pk, number)
        except DatasetError as exc:
            return refused(exc)
        if not job_actions.unpin(request.user, version, node):
            return Response({"detail": f"Version {number} is not pinned on {node}."}, status=404)
        return Response(status=204)
