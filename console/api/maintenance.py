"""/api/v1/maintenance/: planned maintenance windows. Everyone signed in reads the windows still
ahead or under way (what the banner says); admins plan one (a Slurm MAINT reservation) and cancel
it. Every write goes through console.actions.maintenance."""

from __future__ import annotations

from django.utils import timezone
from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.exceptions import PermissionDenied
from rest_framework.response import Response

from accounts.access import is_admin
from console.actions import maintenance
from console.models import MaintenanceWindow
from foundation.api.errors import StrictCharField, error_responses
from foundation.api.views import RefusingAPIView

ERRORS = {
    400: "Bad input: `errors` names each field and what is wrong with it",
    401: "No credentials, or an unknown or revoked token",
    403: "Only admins plan and cancel maintenance",
    404: "No such window",
    503: "Slurm did not take the change; nothing was changed",
}


class WindowSerializer(serializers.ModelSerializer):
    nodes = serializers.ListField(child=serializers.CharField(), help_text="The nodes held; empty: every node")

    class Meta:
        model = MaintenanceWindow
        fields = ["id", "start", "end", "nodes", "reason", "state", "slurm_name"]
        read_only_fields = fields


class WindowInputSerializer(serializers.Serializer):
    start = serializers.DateTimeField(help_text="When the nodes are taken (ISO 8601, in the future)")
    end = serializers.DateTimeField(help_text="When they are back")
    nodes = serializers.ListField(
        child=StrictCharField(max_length=64), required=False, default=list, max_length=1000,
        help_text="Node names; left out or empty: every node",
    )  # fmt: skip
    reason = StrictCharField(max_length=300, help_text="What users read in the banner")


class FieldRefusals(RefusingAPIView):
    """The console's refusals: each carries its words, the field at fault and the status to answer."""

    refusals = (maintenance.MaintenanceError,)

    def refuse(self, exc):
        return Response({"detail": exc.message, "errors": {exc.field: [exc.message]}}, status=exc.status)


def _ahead():
    return MaintenanceWindow.objects.filter(state=MaintenanceWindow.State.PLANNED, end__gt=timezone.now())


class WindowsView(FieldRefusals):
    @extend_schema(
        tags=["maintenance"],
        operation_id="maintenance_list",
        responses={200: WindowSerializer(many=True), **error_responses(ERRORS, 401)},
    )
    def get(self, request):
        return Response(WindowSerializer(_ahead(), many=True).data)

    @extend_schema(
        tags=["maintenance"],
        operation_id="maintenance_create",
        request=WindowInputSerializer,
        responses={201: WindowSerializer, **error_responses(ERRORS, 400, 401, 403, 503)},
    )
    def post(self, request):
        if not is_admin(request.user):
            raise PermissionDenied("Only admins plan maintenance.")
        body = WindowInputSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        data = body.validated_data
        window = maintenance.plan_window(
            request.user,
            maintenance.WindowRequest(data["start"], data["end"], tuple(data["nodes"]), data["reason"]),
        )
        return Response(WindowSerializer(window).data, status=status.HTTP_201_CREATED)


class WindowView(FieldRefusals):
    def _window(self, pk: int) -> MaintenanceWindow:
        window = MaintenanceWindow.objects.filter(pk=pk).first()
        if window is None:
            raise maintenance.MaintenanceError("id", "No such window.", 404)
        return window

    @extend_schema(
        tags=["maintenance"],
        operation_id="maintenance_read",
        responses={200: WindowSerializer, **error_responses(ERRORS, 401, 404)},
    )
    def get(self, request, pk: int):
        return Response(WindowSerializer(self._window(pk)).data)

    @extend_schema(
        tags=["maintenance"],
        operation_id="maintenance_cancel",
        responses={204: None, **error_responses(ERRORS, 401, 403, 404, 503)},
    )
    def delete(self, request, pk: int):
        if not is_admin(request.user):
            raise PermissionDenied("Only admins cancel maintenance.")
        maintenance.cancel_window(request.user, self._window(pk).pk)
        return Response(status=status.HTTP_204_NO_CONTENT)
