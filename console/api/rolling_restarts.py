"""/api/v1/maintenance/restarts/: rolling restarts (admins only). Start one over a list of nodes, read
its progress node by node, stop it. Every write goes through console.actions.rolling_restart."""

from __future__ import annotations

from django.db import transaction
from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.exceptions import NotFound, PermissionDenied
from rest_framework.response import Response

from accounts.access import is_admin
from console.actions import rolling_restart
from console.api.maintenance import FieldRefusals
from console.models import RollingRestart, RollingRestartStep
from console.tasks import advance_rolling_restart
from foundation.api.errors import StrictCharField, error_responses

ERRORS = {
    400: "Bad input: `errors` names each field and what is wrong with it",
    401: "No credentials, or an unknown or revoked token",
    403: "Only admins restart nodes",
    404: "No such rolling restart",
    409: "Another rolling restart is running, or this one is not",
}
RECENT = 20


class StepSerializer(serializers.ModelSerializer):
    state_words = serializers.CharField(source="get_state_display", help_text="The state in words")

    class Meta:
        model = RollingRestartStep
        fields = ["node", "position", "state", "state_words", "asked_at", "done_at", "detail"]
        read_only_fields = fields


class RestartSerializer(serializers.ModelSerializer):
    steps = StepSerializer(many=True, read_only=True)
    canary = serializers.PrimaryKeyRelatedField(read_only=True, help_text="The canary run after it, once it ended")
    gate = serializers.PrimaryKeyRelatedField(
        read_only=True, help_text="With canary_first: the canary on the first tenth, which the rest wait for"
    )

    class Meta:
        model = RollingRestart
        fields = [
            "id", "reason", "state", "canary_first", "started_at", "finished_at", "detail", "gate", "canary", "steps"
        ]  # fmt: skip
        read_only_fields = fields


class RestartInputSerializer(serializers.Serializer):
    nodes = serializers.ListField(
        child=StrictCharField(max_length=64), min_length=1, max_length=1000,
        help_text="The nodes to restart, one at a time, in this order",
    )  # fmt: skip
    reason = StrictCharField(max_length=200, help_text="Why: Slurm shows it as each node's drain reason")
    canary_first = serializers.BooleanField(
        default=False, help_text="Restart a tenth of the nodes first and run the canary on them before the rest"
    )


class _AdminsOnly(FieldRefusals):
    refusals = (rolling_restart.RollingRestartError,)

    def initial(self, request, *args, **kwargs):
        super().initial(request, *args, **kwargs)
        if not is_admin(request.user):
            raise PermissionDenied("Only admins restart nodes.")

    def _restart(self, pk: int) -> RollingRestart:
        restart = RollingRestart.objects.prefetch_related("steps").filter(pk=pk).first()
        if restart is None:
            raise NotFound("No such rolling restart.")
        return restart


class RestartsView(_AdminsOnly):
    @extend_schema(
        tags=["maintenance"],
        operation_id="rolling_restarts_list",
        responses={200: RestartSerializer(many=True), **error_responses(ERRORS, 401, 403)},
    )
    def get(self, request):
        restarts = RollingRestart.objects.prefetch_related("steps")[:RECENT]
        return Response(RestartSerializer(restarts, many=True).data)

    @extend_schema(
        tags=["maintenance"],
        operation_id="rolling_restarts_create",
        request=RestartInputSerializer,
        responses={201: RestartSerializer, **error_responses(ERRORS, 400, 401, 403, 409)},
    )
    def post(self, request):
        body = RestartInputSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        data = body.validated_data
        restart = rolling_restart.start(request.user, data["nodes"], data["reason"], canary_first=data["canary_first"])
        transaction.on_commit(lambda: advance_rolling_restart.delay(restart.pk))
        return Response(RestartSerializer(self._restart(restart.pk)).data, status=status.HTTP_201_CREATED)


class RestartView(_AdminsOnly):
    @extend_schema(
        tags=["maintenance"],
        operation_id="rolling_restarts_read",
        responses={200: RestartSerializer, **error_responses(ERRORS, 401, 403, 404)},
    )
    def get(self, request, pk: int):
        return Response(RestartSerializer(self._restart(pk)).data)


class RestartStopView(_AdminsOnly):
    @extend_schema(
        tags=["maintenance"],
        operation_id="rolling_restarts_stop",
        request=None,
        responses={200: RestartSerializer, **error_responses(ERRORS, 401, 403, 404, 409)},
    )
    def post(self, request, pk: int):
        rolling_restart.stop(request.user, self._restart(pk).pk)
        return Response(RestartSerializer(self._restart(pk)).data)
