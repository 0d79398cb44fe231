"""An invoice as documents: a PDF (WeasyPrint, from templates/billing/invoice_pdf.html) and a
CSV (one row per line, amounts as decimal strings). Both are built from the stored lines, so a
draft's documents say what its lines said when last built, and an issued invoice's never change."""

from __future__ import annotations

import csv
import io

from django.template.loader import render_to_string

from billing.models import Invoice, InvoiceLine
from billing.pricing import format_quantity

# An invoice line's own columns, in order: the CSV and the API (billing/api/invoices.py) both list
# them from here, each adding what it needs around them.
LINE_COLUMNS = ["position", "kind", "plan", "gpu_type", "description", "quantity", "unit", "unit_price", "amount"]
CSV_COLUMNS = ["invoice", "period", "status", *LINE_COLUMNS, "currency", "member"]


def _line_cells(line: InvoiceLine) -> dict[str, object]:
    """A line's LINE_COLUMNS as CSV cells: exact decimals as strings, money to the cent."""
    return {
        "position": line.position,
        "kind": line.kind,
        "plan": line.plan,
        "gpu_type": line.gpu_type,
        # A cell starting with = + - @ is a formula to spreadsheets: never from our text.
        "description": _cell(line.description),
        "quantity": format_quantity(line.quantity),
        "unit": line.unit,
        "unit_price": format_quantity(line.unit_price),
        "amount": f"{line.amount:.2f}",
    }


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
        cells = _line_cells(line)
        writer.writerow(
            [
                label,
                f"{invoice.period:%Y-%m}",
                invoice.status,
                *(cells[column] for column in LINE_COLUMNS),
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
