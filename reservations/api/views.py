"""/api/v1/reservations/: request GPUs for a window, read and cancel one's own, and (admins)
approve or reject. Every write goes through reservations.actions; this module only reads
the body, picks the row the caller may act on and says the outcome.

Who gets what, as in the job API: a reservation the caller may not see (not theirs, not
one they are a member of; admins see all) is a 404, its existence not theirs to learn; one
they can see but may not act on is a 403 (a member cancelling, a non-admin approving)."""

from __future__ import annotations

from django.db.models import Prefetch, Q
from drf_spectacular.utils import OpenApiExample, OpenApiResponse, extend_schema, extend_schema_view
from rest_framework import mixins, status, viewsets
from rest_framework.decorators import action
from rest_framework.response import Response

from accounts.access import is_admin
from cluster.errors import SlurmError
from foundation.api.errors import error_responses
from foundation.api.views import Refusals
from reservations import actions
from reservations.api.pagination import ReservationCursorPagination
from reservations.api.serializers import (
    RejectInputSerializer,
    ReservationInputSerializer,
    ReservationRefusalSerializer,
    ReservationSerializer,
)
from reservations.models import Reservation, ReservationEvent

ERROR_DESCRIPTIONS = {
    400: "Bad input: `errors` names each field and what is wrong with it",
    401: "No credentials, or an unknown or revoked token",
    403: "Visible but not yours to do: only the owner cancels, only admins approve and reject "
    "(or, with the session cookie, no CSRF token)",
    404: "No such reservation among those the caller may see (their own, those they are a member of; admins: all)",
    409: "Not possible in the reservation's state (e.g. already started, approved or cancelled)",
    413: "The body is larger than the API accepts",
    415: "The body is not JSON",
    503: "The cluster's scheduler did not answer; nothing was changed",
}
INVALID_REQUEST = "The reservation request is invalid."
TAGS = ["reservations"]


def errors(*codes: int) -> dict[int, OpenApiResponse]:
    return error_responses(ERROR_DESCRIPTIONS, *codes)


def _flat(field_errors) -> dict[str, list[str]]:
    """DRF nests a list's item errors as {index: [...]}; the error body is field -> messages."""
    flat = {}
    for field, found in field_errors.items():
        if isinstance(found, dict):
            flat[str(field)] = [f"item {index}: {message}" for index, items in found.items() for message in items]
        else:
            flat[str(field)] = [str(message) for message in found]
    return flat


def refused(field_errors, suggestions=()) -> Response:
    return Response(
        {
            "detail": INVALID_REQUEST,
            "errors": _flat(field_errors),
            "suggestions": [moment.isoformat() for moment in suggestions],
        },
        status=status.HTTP_400_BAD_REQUEST,
    )


REQUEST_EXAMPLE = OpenApiExample(
    "Tomorrow 10:00 UTC, 2 A100, 2 hours",
    request_only=True,
    value={
        "gpu_type": "a100",
        "gpu_count": 2,
        "start": "2026-12-07T10:00:00Z",
        "duration_minutes": 120,
        "purpose": "Fine-tuning a 7B model before the deadline",
        "members": ["bob"],
    },
)


@extend_schema_view(
    list=extend_schema(
        operation_id="reservations_list",
        summary="The caller's reservations and those they are a member of, latest window first",
        # 400: a page_size out of range; 404: a cursor that is not one of ours.
        responses={200: ReservationSerializer(many=True), **errors(400, 401, 404)},
        tags=TAGS,
    ),
    retrieve=extend_schema(
        operation_id="reservations_retrieve",
        summary="One reservation, with its history",
        responses={200: ReservationSerializer, **errors(401, 404)},
        tags=TAGS,
    ),
)
class ReservationViewSet(Refusals, mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet):
    # Someone else moved the reservation first: 409; Slurm away: 503, in its public words.
    refusals = (actions.StateError, SlurmError)

    def refuse(self, exc):
        if isinstance(exc, SlurmError):
            return Response({"detail": exc.public_message}, status=503)
        return Response({"detail": str(exc)}, status=409)

    serializer_class = ReservationSerializer
    pagination_class = ReservationCursorPagination

    def get_queryset(self):
        if getattr(self, "swagger_fake_view", False):
            # The schema generator has no user; it needs the model (for the id's type).
            return Reservation.objects.none()
        rows = Reservation.objects.select_related("user").prefetch_related(
            "members",
            Prefetch("events", queryset=ReservationEvent.objects.select_related("actor").order_by("created_at", "id")),
        )
        user = self.request.user
        # Admins read (and decide on) anyone's reservation; the list stays the caller's own.
        if self.action != "list" and is_admin(user):
            return rows
        shared = Reservation.members.through.objects.filter(user=user).values("reservation_id")
        return rows.filter(Q(user=user) | Q(pk__in=shared))

    def _answer(self, reservation: Reservation, code: int = status.HTTP_200_OK) -> Response:
        # Re-read through the queryset: the action changed the row and its events.
        fresh = self.get_queryset().get(pk=reservation.pk)
        return Response(ReservationSerializer(fresh).data, status=code)

    @extend_schema(
        operation_id="reservations_create",
        summary="Request GPUs of one type for a window (an admin then approves or rejects)",
        description=(
            "Answered with the reservation in state `requested`. Refused with 400 when a field is wrong (the "
            "plan's rules included: the Free plan may not reserve) and when the GPUs are not free for that "
            "whole window, then with `suggestions`: the nearest free starts."
        ),
        request=ReservationInputSerializer,
        examples=[REQUEST_EXAMPLE],
        responses={
            201: ReservationSerializer,
            400: OpenApiResponse(ReservationRefusalSerializer, description=ERROR_DESCRIPTIONS[400]),
            **errors(401, 403, 413, 415),
        },
        tags=TAGS,
    )
    def create(self, request):
        body = ReservationInputSerializer(data=request.data)
        if not body.is_valid():
            return refused(body.errors)
        values = body.validated_data
        data = actions.RequestData(
            gpu_type=values["gpu_type"],
            gpu_count=values["gpu_count"],
            start=values["start"],
            duration_minutes=values["duration_minutes"],
            purpose=values["purpose"],
            member_usernames=tuple(values.get("members") or ()),
        )
        try:
            reservation = actions.request(request.user, data)
        except actions.ReservationError as exc:
            return refused(exc.errors, exc.suggestions)
        return self._answer(reservation, status.HTTP_201_CREATED)

    @extend_schema(
        operation_id="reservations_cancel",
        summary="Cancel a reservation before its start (the owner); an approved one leaves Slurm first",
        request=None,
        responses={200: ReservationSerializer, **errors(401, 403, 404, 409)},
        tags=TAGS,
    )
    @action(detail=True, methods=["post"])
    def cancel(self, request, pk=None):
        reservation = self.get_object()
        if reservation.user_id != request.user.pk:
            return Response({"detail": "Only the reservation's owner can cancel it."}, status=403)
        actions.cancel(reservation.pk, request.user)
        return self._answer(reservation)

    @extend_schema(
        operation_id="reservations_approve",
        summary="Approve a request (admins): Slurm then holds the GPUs for the owner and the members",
        description=(
            "Answered with the reservation: `approved` with `slurm_name` and `nodes` when Slurm holds it, or "
            "`failed` with Slurm's words (or the capacity shortfall) in `error`; a failed request may be "
            "approved again. An admin's own request is approved by another admin; a lone admin approving "
            "their own gives a `reason` (audited), else 409."
        ),
        request=None,
        responses={200: ReservationSerializer, **errors(401, 403, 404, 409, 503)},
        tags=TAGS,
    )
    @action(detail=True, methods=["post"])
    def approve(self, request, pk=None):
        reservation = self.get_object()
        if not is_admin(request.user):
            return Response({"detail": "Only admins approve reservations."}, status=403)
        reason = request.data.get("reason", "") if isinstance(request.data, dict) else ""
        actions.approve(reservation.pk, request.user, str(reason))
        return self._answer(reservation)

    @extend_schema(
        operation_id="reservations_reject",
        summary="Reject a request with a reason the owner reads (admins)",
        request=RejectInputSerializer,
        examples=[
            OpenApiExample(
                "Overlaps a maintenance window",
                request_only=True,
                value={"reason": "The A100 nodes are in maintenance that day."},
            )
        ],
        responses={200: ReservationSerializer, **errors(400, 401, 403, 404, 409, 413, 415)},
        tags=TAGS,
    )
    @action(detail=True, methods=["post"])
    def reject(self, request, pk=None):
        reservation = self.get_object()
        if not is_admin(request.user):
            return Response({"detail": "Only admins reject reservations."}, status=403)
        body = RejectInputSerializer(data=request.data)
        if not body.is_valid():
            return Response({"detail": "The rejection is invalid.", "errors": _flat(body.errors)}, status=400)
        try:
            actions.reject(reservation.pk, request.user, body.validated_data["reason"])
        except actions.ReservationError as exc:
            return Response({"detail": "The rejection is invalid.", "errors": exc.errors}, status=400)
        return self._answer(reservation)
