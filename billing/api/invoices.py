"""/api/v1/invoices/: the caller's own invoices (another user's is a 404, admins included:
their invoice pages are in the console), each with its lines, and its PDF and CSV; with
`?group=ID`, a group's invoices for its PI and managers (billing.invoice_access).

Amounts are decimal strings in USD, rounded to the cent (the invoice rule); quantities and
unit prices exact decimal strings."""

from __future__ import annotations

from django.http import HttpResponse
from django.shortcuts import get_object_or_404
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema, extend_schema_view
from rest_framework import mixins, serializers, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import NotFound, PermissionDenied
from rest_framework.renderers import JSONRenderer

from billing.actions import invoicing
from billing.invoice_access import group_invoices, invoices_seen_by
from billing.invoices import documents
from billing.models import Invoice, InvoiceLine
from billing.pricing import format_quantity
from foundation.api.errors import error_responses
from foundation.api.pagination import StrictCursorPagination
from foundation.api.renderers import CsvRenderer, PdfRenderer
from groups.queries import GroupError

ERROR_DESCRIPTIONS = {
    400: "Bad input: a page_size outside 1-200, or an empty `format`",
    401: "No credentials, or an unknown or revoked token",
    403: "`group` names a group whose invoices the caller (a member, not its PI or a manager) does not see",
    404: "No such invoice among the caller's own and their groups' (or a cursor that is not one of ours)",
}
TAGS = ["invoices"]
MONEY_HELP = "USD, decimal string, rounded half-up to the cent"


class DecimalText(serializers.CharField):
    def to_representation(self, value):
        return format_quantity(value)


class Cents(serializers.CharField):
    def to_representation(self, value):
        return f"{value:.2f}"


class InvoiceLineSerializer(serializers.ModelSerializer):
    kind = serializers.ChoiceField(choices=InvoiceLine.Kind.choices)
    member = serializers.SlugRelatedField(
        slug_field="username", read_only=True, allow_null=True, help_text="A group's invoice: whose runs the line bills"
    )
    quantity = DecimalText(help_text="Exact decimal string")
    unit_price = DecimalText(help_text="USD per unit, decimal string (a discount line: the rate)")
    amount = Cents(help_text=MONEY_HELP)
    credit_entry_ids = serializers.ListField(
        child=serializers.IntegerField(), help_text="Credits ledger entries a credits line stands for"
    )

    class Meta:
        model = InvoiceLine
        fields = [*documents.LINE_COLUMNS, "credit_entry_ids", "member"]


class InvoiceSummarySerializer(serializers.ModelSerializer):
    status = serializers.ChoiceField(choices=Invoice.Status.choices)
    period = serializers.DateField(help_text="The first day of the month billed")
    subtotal = Cents(help_text=MONEY_HELP)
    discount = Cents(help_text="Volume discount, 0 or less; " + MONEY_HELP)
    credits = Cents(help_text="Credits applied, 0 or less; " + MONEY_HELP)
    total = Cents(help_text="The sum of the rounded lines; " + MONEY_HELP)
    pdf = serializers.SerializerMethodField()
    csv = serializers.SerializerMethodField()
    group = serializers.PrimaryKeyRelatedField(
        read_only=True, allow_null=True, help_text="The group that pays this invoice; null: the caller's own"
    )

    class Meta:
        model = Invoice
        fields = [
            "id",
            "group",
            "number",
            "period",
            "status",
            "currency",
            "subtotal",
            "discount",
            "credits",
            "total",
            "issued_at",
            "paid_at",
            "voided_at",
            "void_reason",
            "refreshed_at",
            "pdf",
            "csv",
        ]

    def _url(self, invoice, name) -> str:
        request = self.context.get("request")
        path = f"/api/v1/invoices/{invoice.pk}/{name}"
        return request.build_absolute_uri(path) if request else path

    def get_pdf(self, invoice) -> str:
        return self._url(invoice, "pdf")

    def get_csv(self, invoice) -> str:
        return self._url(invoice, "csv")


class InvoiceSerializer(InvoiceSummarySerializer):
    lines = InvoiceLineSerializer(many=True, read_only=True)

    class Meta(InvoiceSummarySerializer.Meta):
        fields = [*InvoiceSummarySerializer.Meta.fields, "lines"]


class InvoiceCursorPagination(StrictCursorPagination):
    """Keyset pagination on (period, id), the latest month first."""

    ordering = ("-period", "-id")


@extend_schema_view(
    list=extend_schema(
        operation_id="invoices_list",
        summary="The caller's invoices (drafts too), latest month first, without lines; with `group`, that group's",
        parameters=[
            OpenApiParameter(
                "group", int, required=False, description="A group's id: its invoices (its PI and managers only)"
            )
        ],
        responses={
            200: InvoiceSummarySerializer(many=True),
            **error_responses(ERROR_DESCRIPTIONS, 400, 401, 403, 404),
        },
        tags=TAGS,
    ),
    retrieve=extend_schema(
        operation_id="invoices_retrieve",
        summary="One of the caller's invoices (or their groups', for a PI or manager) with its lines",
        responses={200: InvoiceSerializer, **error_responses(ERROR_DESCRIPTIONS, 401, 404)},
        tags=TAGS,
    ),
)
class InvoiceViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet):
    pagination_class = InvoiceCursorPagination

    def get_queryset(self):
        if getattr(self, "swagger_fake_view", False):
            return Invoice.objects.none()
        group = self.request.query_params.get("group")
        if self.action == "list" and group not in (None, ""):
            try:
                rows = group_invoices(self.request.user, group)
            except GroupError as exc:
                raise (PermissionDenied if exc.status == 403 else NotFound)(exc.message) from exc
        elif self.action == "list":
            rows = Invoice.objects.filter(user=self.request.user)
        else:
            rows = invoices_seen_by(self.request.user)
        if self.action == "retrieve":
            rows = rows.prefetch_related("lines__member")
        return rows

    def get_serializer_class(self):
        return InvoiceSerializer if self.action == "retrieve" else InvoiceSummarySerializer

    def _own(self, pk) -> Invoice:
        return invoicing.up_to_date(
            get_object_or_404(invoices_seen_by(self.request.user).select_related("user", "group"), pk=pk)
        )

    def get_object(self):
        # A draft is shown as its records and plans make it now (billing.actions.invoicing.up_to_date).
        return invoicing.up_to_date(super().get_object())

    @extend_schema(
        operation_id="invoices_pdf",
        summary="The invoice as a PDF",
        responses={
            (200, "application/pdf"): OpenApiResponse(OpenApiTypes.BINARY),
            **error_responses(ERROR_DESCRIPTIONS, 400, 401, 404),
        },
        tags=TAGS,
    )
    @action(detail=True, methods=["get"], renderer_classes=[JSONRenderer, PdfRenderer])
    def pdf(self, request, pk=None):
        invoice = self._own(pk)
        return _download(documents.invoice_pdf(invoice), "application/pdf", documents.filename(invoice, "pdf"))

    @extend_schema(
        operation_id="invoices_csv",
        summary="The invoice's lines as CSV (amounts as decimal strings; subtotal, discount, credits and total last)",
        responses={
            (200, "text/csv"): OpenApiResponse(OpenApiTypes.STR),
            **error_responses(ERROR_DESCRIPTIONS, 400, 401, 404),
        },
        tags=TAGS,
    )
    @action(detail=True, methods=["get"], renderer_classes=[JSONRenderer, CsvRenderer])
    def csv(self, request, pk=None):
        invoice = self._own(pk)
        return _download(documents.invoice_csv(invoice), "text/csv; charset=utf-8", documents.filename(invoice, "csv"))


def _download(body, content_type: str, name: str) -> HttpResponse:
    response = HttpResponse(body, content_type=content_type)
    response["Content-Disposition"] = f'attachment; filename="{name}"'
    return response
