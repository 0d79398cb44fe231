"""Invoice pages: a user's invoices and one invoice (lines a page at a time, so the page costs
the same queries at 10 lines and at 10,000), its PDF and CSV; the admins' billing pages:
revenue by month, plan and GPU type, unpaid invoices, one invoice with "record a payment" and
"void" (both audited by billing.actions.payments / billing.actions.invoicing)."""

from __future__ import annotations

import json
import uuid

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.db.models import Count, Q, Sum
from django.http import HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST

from accounts.access import role_required
from accounts.models import Role
from billing import actions
from billing.actions import invoicing
from billing.actions.payments import PaymentError
from billing.invoice_access import bill_group_ids, invoices_seen_by
from billing.invoices import documents
from billing.models import Invoice, InvoiceLine, UsageRecord

LINES_PER_PAGE = 100
# Revenue counts what was invoiced and stands: issued (owed) and paid, never drafts or void.
BILLED = Q(invoice__status__in=[Invoice.Status.ISSUED, Invoice.Status.PAID])


# Admins only: 403 to anyone else (accounts.access, the one rule for role pages).
admin_required = role_required(Role.ADMIN)


def _own(request, pk) -> Invoice:
    # Another user's invoice is a 404: its existence is not theirs to learn. A group's invoice
    # is its PI's and managers' (billing.invoice_access).
    return invoicing.up_to_date(
        get_object_or_404(invoices_seen_by(request.user).select_related("user", "group"), pk=pk)
    )


def _invoice_context(request, invoice: Invoice) -> dict:
    lines = Paginator(InvoiceLine.objects.filter(invoice=invoice).order_by("position"), LINES_PER_PAGE)
    payments = list(invoice.payments.all())
    return {
        "invoice": invoice,
        "page": lines.get_page(request.GET.get("page")),
        "payments": payments,
        "paid": sum((payment.amount for payment in payments), 0),
        "sweeps": sweeps_on_invoice(invoice),
    }


def sweeps_on_invoice(invoice: Invoice) -> list[dict]:
    """What the invoice's usage owes to each sweep (its tasks' runs, every attempt): exact
    amounts, the part of the lines above that each sweep's tasks make up."""
    return list(
        UsageRecord.objects.filter(invoice=invoice, job__sweep__isnull=False)
        .values("job__sweep", "job__sweep__name")
        .annotate(runs=Count("id"), gpu_seconds=Sum("gpu_seconds"), amount=Sum("amount"))
        .order_by("job__sweep")
    )


@login_required
def invoices(request):
    rows = Invoice.objects.filter(user=request.user).order_by("-period", "-id")
    page = Paginator(rows, 24).get_page(request.GET.get("page"))
    group_rows = (
        Invoice.objects.filter(group_id__in=bill_group_ids(request.user))
        .select_related("group")
        .order_by("-period", "group__name", "-id")[:48]
    )
    return render(request, "billing/invoices.html", {"page": page, "group_invoices": group_rows})


@login_required
def invoice(request, pk):
    return render(request, "billing/invoice.html", _invoice_context(request, _own(request, pk)))


def _download(body, content_type: str, name: str) -> HttpResponse:
    response = HttpResponse(body, content_type=content_type)
    response["Content-Disposition"] = f'attachment; filename="{name}"'
    return response


@login_required
def invoice_pdf(request, pk):
    invoice = _own(request, pk)
    return _download(documents.invoice_pdf(invoice), "application/pdf", documents.filename(invoice, "pdf"))


@login_required
def invoice_csv(request, pk):
    invoice = _own(request, pk)
    return _download(documents.invoice_csv(invoice), "text/csv; charset=utf-8", documents.filename(invoice, "csv"))


# --- admins ---------------------------------------------------------------------------------


def revenue() -> dict:
    """Invoiced revenue (issued and paid invoices' lines), by month, by plan and by GPU type."""
    lines = InvoiceLine.objects.filter(BILLED)
    by_month_plan = list(
        lines.values("invoice__period", "plan").annotate(amount=Sum("amount")).order_by("invoice__period", "plan")
    )
    months = sorted({row["invoice__period"] for row in by_month_plan})
    plans = sorted({row["plan"] for row in by_month_plan})
    grid = {(row["invoice__period"], row["plan"]): row["amount"] for row in by_month_plan}
    chart = [
        {
            "type": "bar",
            "name": plan or "other",
            "x": [f"{month:%Y-%m}" for month in months],
            "y": [str(grid.get((month, plan), 0)) for month in months],
        }
        for plan in plans
    ]
    return {
        "by_month": [
            {"period": month, "amount": sum((grid.get((month, plan), 0) for plan in plans), 0)} for month in months
        ],
        "by_plan": list(lines.values("plan").annotate(amount=Sum("amount")).order_by("-amount", "plan")),
        "by_gpu_type": list(
            lines.exclude(gpu_type="").values("gpu_type").annotate(amount=Sum("amount")).order_by("-amount", "gpu_type")
        ),
        "chart": json.dumps(chart),
    }


@admin_required
def admin_billing(request):
    unpaid = (
        Invoice.objects.filter(status=Invoice.Status.ISSUED)
        .select_related("user", "group")
        .annotate(paid=Sum("payments__amount"))
        .order_by("issued_at", "id")
    )
    return render(
        request,
        "billing/admin_billing.html",
        {**revenue(), "unpaid": Paginator(unpaid, 50).get_page(request.GET.get("page"))},
    )


@admin_required
def admin_invoice(request, pk):
    invoice = get_object_or_404(Invoice.objects.select_related("user", "group"), pk=pk)
    context = _invoice_context(request, invoice)
    context.update(
        admin=True,
        outstanding=invoice.total - context["paid"],
        # A fresh key per form shown: a double submit of this form records one payment.
        idempotency_key=uuid.uuid4().hex,
    )
    return render(request, "billing/invoice.html", context)


@admin_required
@require_POST
def admin_record_payment(request, pk):
    invoice = get_object_or_404(Invoice, pk=pk)
    try:
        result = actions.record_payment(
            invoice.pk,
            request.POST.get("amount", ""),
            idempotency_key=request.POST.get("idempotency_key", ""),
            reference=request.POST.get("reference", "").strip(),
            actor=request.user,
        )
    except PaymentError as exc:
        messages.error(request, f"Payment not recorded: {exc.message}")
    else:
        if result.created:
            messages.success(request, f"Payment of ${result.payment.amount} recorded on {invoice.number}.")
        else:
            messages.info(request, "That payment was recorded already.")
    return redirect("billing:admin_invoice", pk=invoice.pk)


@admin_required
@require_POST
def admin_void(request, pk):
    invoice = get_object_or_404(Invoice, pk=pk)
    try:
        actions.void_invoice(invoice.pk, actor=request.user, reason=request.POST.get("reason", ""))
    except (ValueError, invoicing.InvoiceStateError) as exc:
        messages.error(request, f"Not voided: {exc}")
    else:
        messages.success(request, f"{invoice.number} is void.")
    return redirect("billing:admin_invoice", pk=invoice.pk)


@admin_required
@require_POST
def admin_issue(request, pk):
    """Issue a redraft (the closer issues every other draft itself)."""
    invoice = get_object_or_404(Invoice, pk=pk, status=Invoice.Status.DRAFT, replaces__isnull=False)
    issued = actions.issue_invoice(invoice.pk, actor=request.user)
    messages.success(request, f"{issued.number} issued.")
    return redirect("billing:admin_invoice", pk=invoice.pk)
