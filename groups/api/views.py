"""/api/v1/groups/: groups, members, invitations, allocations and usage. Every write goes
through groups.actions; every group is found through groups.queries, so a group the caller
is not a member of is a 404 (admins see every group). Refusals have the API's one shape."""

from __future__ import annotations

from django.utils import timezone
from drf_spectacular.utils import extend_schema
from rest_framework.response import Response

from accounts.access import is_admin
from cluster.errors import SlurmError
from foundation.api.errors import error_responses
from foundation.api.views import RefusingAPIView
from groups import actions, usage
from groups.api.serializers import (
    AcceptInputSerializer,
    AllocationInputSerializer,
    AllocationSerializer,
    DecisionInputSerializer,
    GroupInputSerializer,
    GroupSerializer,
    GroupUsageSerializer,
    InvitationInputSerializer,
    InvitationSerializer,
    MemberSerializer,
    RoleInputSerializer,
)
from groups.models import Allocation, Group, Membership
from groups.queries import GroupError, visible_group

TAGS = ["groups"]
ERRORS = {
    400: "Bad input: `errors` names each field and what is wrong with it",
    401: "No credentials, or an unknown or revoked token",
    403: "Visible but not yours to do (e.g. a member inviting; a non-admin deciding an allocation)",
    404: "No such group among the caller's (admins: all), or no such member, invitation or allocation",
    409: "Not possible in the current state (already a member, already decided, the PI leaving)",
    503: "Slurm's accounting did not answer; nothing was changed",
}


def errors(*codes: int) -> dict:
    return error_responses(ERRORS, *codes)


def refusal(exc: GroupError) -> Response:
    body = {"detail": exc.message}
    if exc.status == 400:
        body = {"detail": "The request is invalid.", "errors": {exc.field: [exc.message]}}
    return Response(body, status=exc.status)


class GroupAPIView(RefusingAPIView):
    """A refusal from groups (GroupError: a field, words, a status) answers in the API's one
    shape, wherever in the view it is raised."""

    refusals = (GroupError,)

    def refuse(self, exc):
        return refusal(exc)


def _context(user) -> dict:
    roles = dict(Membership.objects.active().filter(user=user).values_list("group_id", "role"))
    return {"roles": roles, "is_admin": is_admin(user)}


class GroupListView(GroupAPIView):
    @extend_schema(
        tags=TAGS,
        responses={200: GroupSerializer(many=True), **errors(401)},
        summary="Your groups",
        operation_id="groups_list",
    )
    def get(self, request):
        groups = (
            Group.objects.all()
            if is_admin(request.user)
            else Group.objects.filter(memberships__user=request.user, memberships__left_at__isnull=True)
        )
        context = _context(request.user)
        return Response(GroupSerializer(groups.distinct(), many=True, context=context).data)

    @extend_schema(
        tags=TAGS,
        request=GroupInputSerializer,
        responses={201: GroupSerializer, **errors(400, 401, 403, 409)},
        summary="Create a group (you are its PI)",
        operation_id="groups_create",
    )
    def post(self, request):
        body = GroupInputSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        group = actions.create_group(request.user, **body.validated_data)
        return Response(GroupSerializer(group, context=_context(request.user)).data, status=201)


class GroupDetailView(GroupAPIView):
    @extend_schema(
        tags=TAGS,
        responses={200: GroupSerializer, **errors(401, 404)},
        summary="One group",
        operation_id="groups_retrieve",
    )
    def get(self, request, pk: int):
        group = visible_group(request.user, pk)
        return Response(GroupSerializer(group, context=_context(request.user)).data)


class MemberListView(GroupAPIView):
    @extend_schema(
        tags=TAGS,
        responses={200: MemberSerializer(many=True), **errors(401, 404)},
        summary="Members",
        operation_id="groups_members_list",
    )
    def get(self, request, pk: int):
        group = visible_group(request.user, pk)
        members = Membership.objects.active().filter(group=group).select_related("user__profile")
        return Response(MemberSerializer(members, many=True).data)


class MemberView(GroupAPIView):
    @extend_schema(
        tags=TAGS,
        responses={204: None, **errors(401, 403, 404, 409)},
        summary="Remove a member, or leave",
        operation_id="groups_member_remove",
    )
    def delete(self, request, pk: int, user_id: int):
        actions.remove_member(pk, request.user, user_id)
        return Response(status=204)

    @extend_schema(
        tags=TAGS,
        request=RoleInputSerializer,
        responses={200: MemberSerializer, **errors(400, 401, 403, 404, 409)},
        summary="Change a member's role (the PI)",
        operation_id="groups_member_role",
    )
    def put(self, request, pk: int, user_id: int):
        body = RoleInputSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        changed = actions.change_role(pk, request.user, user_id, body.validated_data["role"])
        return Response(MemberSerializer(changed).data)


class InvitationListView(GroupAPIView):
    @extend_schema(
        tags=TAGS,
        responses={200: InvitationSerializer(many=True), **errors(401, 403, 404)},
        summary="Invitations",
        operation_id="groups_invitations_list",
    )
    def get(self, request, pk: int):
        actions.require_manager(request.user, pk)
        group = visible_group(request.user, pk)
        return Response(InvitationSerializer(group.invitations.all(), many=True).data)

    @extend_schema(
        tags=TAGS,
        request=InvitationInputSerializer,
        responses={201: InvitationSerializer, **errors(400, 401, 403, 404, 409)},
        summary="Invite an address (an e-mail with the link goes out)",
        operation_id="groups_invite",
    )
    def post(self, request, pk: int):
        body = InvitationInputSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        invitation, _token = actions.invite(pk, request.user, **body.validated_data)
        return Response(InvitationSerializer(invitation).data, status=201)


class InvitationView(GroupAPIView):
    @extend_schema(
        tags=TAGS,
        responses={204: None, **errors(401, 403, 404, 409)},
        summary="Revoke an invitation",
        operation_id="groups_invitation_revoke",
    )
    def delete(self, request, pk: int, invitation_id: int):
        actions.revoke_invitation(pk, invitation_id, request.user)
        return Response(status=204)


class AcceptView(GroupAPIView):
    @extend_schema(
        tags=TAGS,
        request=AcceptInputSerializer,
        responses={201: MemberSerializer, **errors(400, 401, 403, 404, 409)},
        summary="Accept an invitation (your verified address must be the invited one)",
        operation_id="groups_invitation_accept",
    )
    def post(self, request):
        body = AcceptInputSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        joined = actions.accept_invitation(body.validated_data["token"], request.user)
        return Response(MemberSerializer(joined).data, status=201)


class AllocationListView(GroupAPIView):
    @extend_schema(
        tags=TAGS,
        responses={200: AllocationSerializer(many=True), **errors(401, 404)},
        summary="Allocations",
        operation_id="groups_allocations_list",
    )
    def get(self, request, pk: int):
        group = visible_group(request.user, pk)
        return Response(AllocationSerializer(group.allocations.all(), many=True).data)

    @extend_schema(
        tags=TAGS,
        request=AllocationInputSerializer,
        responses={201: AllocationSerializer, **errors(400, 401, 403, 404)},
        summary="Ask for GPU-hours for a period (the PI or a manager); admins decide",
        operation_id="groups_allocation_request",
    )
    def post(self, request, pk: int):
        body = AllocationInputSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        values = dict(body.validated_data)
        renews = values.pop("renews", None)
        allocation = actions.request_allocation(pk, request.user, renews_id=renews, **values)
        return Response(AllocationSerializer(allocation).data, status=201)


class AllocationDecisionView(GroupAPIView):
    @extend_schema(
        tags=TAGS,
        request=DecisionInputSerializer,
        responses={200: AllocationSerializer, **errors(400, 401, 403, 404, 409)},
        summary="Approve or refuse a request (admins; not one of their own group's)",
        operation_id="groups_allocation_decide",
    )
    def post(self, request, allocation_id: int):
        body = DecisionInputSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        if not is_admin(request.user):
            # Not an admin: whether the allocation exists is not theirs to learn.
            return Response({"detail": "No such allocation."}, status=404)
        allocation = actions.decide_allocation(allocation_id, request.user, **body.validated_data)
        return Response(AllocationSerializer(allocation).data)


class UsageView(GroupAPIView):
    @extend_schema(
        tags=TAGS,
        responses={200: GroupUsageSerializer, **errors(401, 404, 503)},
        summary="GPU-hours by member and type this month (Slurm's accounting); a member sees their own",
        operation_id="groups_usage",
    )
    def get(self, request, pk: int):
        group = visible_group(request.user, pk)
        until = timezone.now()
        try:
            since, rows = usage.month_usage_seen_by(request.user, group, until)
        except SlurmError as exc:
            return Response({"detail": f"Slurm's accounting did not answer: {exc.public_message}"}, status=503)
        allocations = group.allocations.filter(state=Allocation.State.APPROVED, ends_on__gt=since.date())
        data = {"since": since, "until": until, "rows": rows, "allocations": allocations}
        return Response(GroupUsageSerializer(data).data)
