"""An invoice as documents: a PDF (WeasyPrint, from templates/billing/invoice_pdf.html) and a
CSV (one row per line, amounts as decimal strings). Both are built from the stored lines, so a
draft's documents say what its lines said when last built, and an issued invoice's never change."""

from __future__ import annotations

import csv
import io

from django.template.loader import render_to_string

from billing.models import Invoice, InvoiceLine
from billing.pricing import format_quantity

CSV_COLUMNS = [
    "invoice",
    "period",
    "status",
    "position",
    "kind",
    "plan",
    "gpu_type",
    "description",
    "quantity",
    "unit",
    "unit_price",
    "amount",
    "currency",
    "member",
]


def filename(invoice: Invoice, extension: str) -> str:
    name = invoice.number or f"draft-{invoice.period:%Y-%m}-{invoice.pk}"
    return f"{name}.{extension}"


def invoice_csv(invoice: Invoice) -> str:
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(CSV_COLUMNS)
    label = invoice.number or "draft"
    for line in (
        InvoiceLine.objects.filter(invoice=invoice)
        .select_related("member")
        .order_by("position")
        .iterator(chunk_size=2000)
    ):
        writer.writerow(
            [
                label,
                f"{invoice.period:%Y-%m}",
                invoice.status,
                line.position,
                line.kind,
                line.plan,
                line.gpu_type,
                # A cell starting with = + - @ is a formula to spreadsheets: never from our text.
                _cell(line.description),
                format_quantity(line.quantity),
                line.unit,
                format_quantity(line.unit_price),
                f"{line.amount:.2f}",
                invoice.currency,
                _cell(line.member.username) if line.member_id else "",
            ]
        )
    for name, amount in [
        ("subtotal", invoice.subtotal),
        ("discount", invoice.discount),
        ("credits", invoice.credits),
        ("total", invoice.total),
    ]:
        writer.writerow(
            [
                label,
                f"{invoice.period:%Y-%m}",
                invoice.status,
                "",
                name,
                "",
                "",
                name,
                "",
                "",
                "",
                f"{amount:.2f}",
                invoice.currency,
                "",
            ]
        )
    return out.getvalue()


def _cell(text: str) -> str:
    return "'" + text if text[:1] in ("=", "+", "-", "@") else text


def invoice_pdf(invoice: Invoice) -> bytes:
    # WeasyPrint loads pango through cffi when imported: only where a PDF is made.
    from weasyprint import HTML

    html = render_to_string(
        "billing/invoice_pdf.html",
        {
            "invoice": invoice,
            "lines": InvoiceLine.objects.filter(invoice=invoice).order_by("position"),
            "payments": invoice.payments.all(),
        },
    )
    return HTML(string=html).write_pdf()
