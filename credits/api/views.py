"""GET /api/v1/credits/ (one's own balance and entries); GET/POST /api/v1/campaigns/ (marketing)."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema, extend_schema_view
from rest_framework import mixins, status, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import PermissionDenied
from rest_framework.permissions import BasePermission
from rest_framework.response import Response

from credits import actions
from credits.actions import ledger
from credits.actions.campaigns import ApprovalRefused
from credits.api.serializers import CampaignSerializer, EntrySerializer
from credits.models import Campaign, LedgerEntry
from foundation.api.errors import error_responses
from foundation.api.pagination import StrictCursorPagination

ERROR_DESCRIPTIONS = {
    400: "Bad input: `errors` names each field and what is wrong with it",
    401: "No credentials, or an unknown or revoked token",
    403: "Not a marketing account (or, with the session cookie, no CSRF token)",
    404: "A cursor that is not one of ours, or no such campaign",
    409: "The campaign needs no approval, has it already, or the caller made it (`detail` says which)",
    413: "The body is larger than the API accepts",
    415: "The body is not JSON",
}


class EntryPagination(StrictCursorPagination):
    ordering = ("-created_at", "-id")

    def get_paginated_response_schema(self, schema):
        page = super().get_paginated_response_schema(schema)
        properties = page["properties"]
        return {
            "type": "object",
            "required": ["balance", "spendable", "next", "previous", "entries"],
            "properties": {
                "balance": {"type": "integer", "description": "Credits (RTX 4090 GPU-seconds): the sum of every entry"},
                "spendable": {
                    "type": "integer",
                    "description": "What a job could use now: the balance less expired credit not yet written off",
                },
                "next": properties["next"],
                "previous": properties["previous"],
                "entries": schema,
            },
        }

    def get_paginated_response(self, data):
        return Response(
            {
                "balance": self.balance,
                "spendable": self.spendable,
                "next": self.get_next_link(),
                "previous": self.get_previous_link(),
                "entries": data,
            }
        )


@extend_schema_view(
    list=extend_schema(
        operation_id="credits_list",
        summary="The caller's credit balance and ledger entries, newest first",
        responses={200: EntrySerializer(many=True), **error_responses(ERROR_DESCRIPTIONS, 400, 401, 404)},
        tags=["credits"],
    )
)
class CreditViewSet(mixins.ListModelMixin, viewsets.GenericViewSet):
    serializer_class = EntrySerializer
    pagination_class = EntryPagination

    def get_queryset(self):
        if getattr(self, "swagger_fake_view", False):
            return LedgerEntry.objects.none()
        # By the account's id, not through a join: the (account, -created_at, -id) index then
        # serves the page in order, at any ledger size.
        return LedgerEntry.objects.filter(account_id=ledger.account_for(self.request.user.pk).pk)

    def paginate_queryset(self, queryset):
        self.paginator.balance = ledger.balance(self.request.user.pk)
        self.paginator.spendable = ledger.spendable_balance(self.request.user.pk)
        return super().paginate_queryset(queryset)


class IsMarketing(BasePermission):
    def has_permission(self, request, view):
        profile = getattr(request.user, "profile", None)
        if not (profile and profile.is_marketing):
            raise PermissionDenied("Campaigns are for marketing accounts.")
        return True


class CampaignPagination(StrictCursorPagination):
    ordering = ("-start", "-id")


@extend_schema_view(
    list=extend_schema(
        operation_id="campaigns_list",
        summary="Credit campaigns, latest start first (marketing only)",
        responses={200: CampaignSerializer(many=True), **error_responses(ERROR_DESCRIPTIONS, 400, 401, 403, 404)},
        tags=["campaigns"],
    ),
    create=extend_schema(
        operation_id="campaigns_create",
        summary="Create a credit campaign; the grant amounts default to docs/product.md's (marketing only)",
        request=CampaignSerializer,
        responses={201: CampaignSerializer, **error_responses(ERROR_DESCRIPTIONS, 400, 401, 403, 413, 415)},
        tags=["campaigns"],
    ),
)
class CampaignViewSet(mixins.ListModelMixin, mixins.CreateModelMixin, viewsets.GenericViewSet):
    serializer_class = CampaignSerializer
    pagination_class = CampaignPagination
    permission_classes = [IsMarketing]

    def get_queryset(self):
        return Campaign.objects.all()

    def create(self, request, *args, **kwargs):
        body = self.get_serializer(data=request.data)
        body.is_valid(raise_exception=True)
        campaign = actions.create_campaign(request.user, body.validated_data)
        return Response(self.get_serializer(campaign).data, status=status.HTTP_201_CREATED)

    @extend_schema(
        operation_id="campaigns_approve",
        summary="Approve a campaign's large budget (marketing only; never the campaign's own creator)",
        request=None,
        responses={200: CampaignSerializer, **error_responses(ERROR_DESCRIPTIONS, 401, 403, 404, 409)},
        tags=["campaigns"],
    )
    @action(detail=True, methods=["post"])
    def approve(self, request, pk=None):
        campaign = self.get_object()
        try:
            campaign = actions.approve_campaign(campaign.pk, request.user)
        except ApprovalRefused as exc:
            return Response({"detail": str(exc)}, status=status.HTTP_409_CONFLICT)
        return Response(self.get_serializer(campaign).data)
