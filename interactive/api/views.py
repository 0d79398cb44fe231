from drf_spectacular.utils import OpenApiExample, extend_schema, extend_schema_view
from rest_framework import mixins, status, viewsets
from rest_framework.decorators import action
from rest_framework.response import Response

from foundation.api.errors import RETRY_AFTER
from interactive import actions
from interactive.api.serializers import SessionInputSerializer, SessionSerializer
from interactive.boards import BOARD_FIELDS
from interactive.models import InteractiveSession
from jobs import actions as job_actions
from jobs.api.schema import errors
from jobs.api.views import accepted_or_refused, invalid, json_type_errors
from jobs.live.watching import watch


@extend_schema_view(
    list=extend_schema(
        operation_id="sessions_list",
        summary="The caller's interactive sessions, newest first",
        responses={200: SessionSerializer(many=True), **errors(400, 401, 404)},
        tags=["sessions"],
    ),
    retrieve=extend_schema(
        operation_id="sessions_retrieve",
        summary="One session: its state and, once ready, its url",
        responses={200: SessionSerializer, **errors(401, 404)},
        tags=["sessions"],
    ),
)
class SessionViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet):
    """The caller's own sessions; another user's is a 404."""

    serializer_class = SessionSerializer

    def get_queryset(self):
        if getattr(self, "swagger_fake_view", False):
            return InteractiveSession.objects.none()
        return InteractiveSession.objects.filter(owner=self.request.user).select_related("job").order_by("-id")

    def retrieve(self, request, *args, **kwargs):
        response = super().retrieve(request, *args, **kwargs)
        if response.data.get("job_state") == "PENDING":
            watch([response.data["job"]])
        return response

    @extend_schema(
        operation_id="sessions_create",
        summary="Start a session (JupyterLab, VS Code or TensorBoard) as a job on a GPU type and count, or GPU memory",
        request=SessionInputSerializer,
        examples=[
            OpenApiExample(
                "TensorBoard comparing a sweep's tasks for an hour",
                request_only=True,
                value={
                    "kind": "tensorboard",
                    "board_sweep": 12,
                    "image": "nvcr.io/nvidia/pytorch:24.05-py3",
                    "gpu_type": "rtx4090",
                    "gpu_count": 1,
                    "time_limit_minutes": 60,
                },
            ),
            OpenApiExample(
                "JupyterLab on one GPU for two hours",
                request_only=True,
                value={
                    "kind": "jupyterlab",
                    "image": "nvcr.io/nvidia/pytorch:24.05-py3",
                    "gpu_type": "rtx4090",
                    "gpu_count": 1,
                    "time_limit_minutes": 120,
                },
            ),
        ],
        responses={201: SessionSerializer, **errors(400, 401, 403, 409, 413, 415, 429)},
        parameters=[RETRY_AFTER],
        tags=["sessions"],
    )
    def create(self, request):
        type_errors = json_type_errors(request.data)
        if not type_errors:
            for field in BOARD_FIELDS:
                value = request.data.get(field)
                if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
                    type_errors[field] = ["Give the id as a whole number."]
        if type_errors:
            return invalid(type_errors)
        session, refusal = accepted_or_refused(actions.start, request, request.data)
        if refusal is not None:
            return refusal
        session.job.refresh_from_db()
        return Response(SessionSerializer(session).data, status=status.HTTP_201_CREATED)

    @extend_schema(
        operation_id="sessions_stop",
        summary="Stop a session (its job is cancelled)",
        request=None,
        responses={200: SessionSerializer, **errors(401, 404, 409)},
        tags=["sessions"],
    )
    @action(detail=True, methods=["post"])
    def stop(self, request, pk=None):
        session = self.get_object()
        try:
            actions.stop(session)
        except job_actions.CancelRefused as exc:
            return Response({"detail": str(exc)}, status=409)
        session.refresh_from_db()
        session.job.refresh_from_db()
        return Response(SessionSerializer(session).data)
