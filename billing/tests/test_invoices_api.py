"""GET /api/v1/invoices/ and /{id}/ (own only; lines; amounts as decimal strings), the PDF and
CSV downloads (a real PDF holding the number), and the schema's four operations."""

import csv
import io
from datetime import date
from decimal import Decimal

import pytest
from pypdf import PdfReader
from rest_framework.test import APIClient

from billing.actions import invoicing
from billing.models import Invoice
from billing.tests.invoice_support import at, charge, subscription_history

pytestmark = pytest.mark.django_db
URL = "/api/v1/invoices/"


@pytest.fixture
def march(alice):
    subscription_history(alice, ("pro", "active", at(2026, 1, 1)))
    charge(alice, at(2026, 3, 5), plan="pro", billable=1800, gpu_price=Decimal("0.0015"), nvme_gb_seconds=900_000)
    return invoicing.issue_invoice(Invoice.objects.get(user=alice, period=date(2026, 3, 1)).pk)


def test_own_invoices_are_listed_latest_first_with_cursor_pages(api_client_for, alice, march):
    april = Invoice.objects.create(user=alice, period=date(2026, 4, 1))
    first = api_client_for(alice).get(URL, {"page_size": 1})
    assert first.status_code == 200, first.content
    page = first.json()
    assert [row["id"] for row in page["results"]] == [april.pk]
    second = api_client_for(alice).get(page["next"]).json()
    assert [(row["id"], row["number"], row["total"]) for row in second["results"]] == [
        (march.pk, march.number, "306.70")
    ]
    assert "lines" not in second["results"][0]
    assert api_client_for(alice).get(URL, {"page_size": 0}).status_code == 400


def test_an_invoice_with_its_lines_as_decimal_strings(api_client_for, alice, march):
    body = api_client_for(alice).get(f"{URL}{march.pk}/").json()
    assert (body["status"], body["period"], body["subtotal"], body["total"]) == (
        "issued",
        "2026-03-01",
        "306.70",
        "306.70",
    )
    assert [(line["kind"], line["quantity"], line["unit_price"], line["amount"]) for line in body["lines"]] == [
        ("plan_fee", "1", "299", "299.00"),
        ("overage", "1800", "0.0015", "2.70"),
        ("nvme", "250", "0.02", "5.00"),
    ]
    assert body["pdf"].endswith(f"/api/v1/invoices/{march.pk}/pdf")


def test_someone_elses_invoice_is_not_found(api_client_for, bob, march):
    client = api_client_for(bob)
    for path in (f"{URL}{march.pk}/", f"{URL}{march.pk}/pdf", f"{URL}{march.pk}/csv"):
        response = client.get(path)
        assert response.status_code == 404, path
        assert "detail" in response.json()
    assert client.get(URL).json()["results"] == []
    assert APIClient().get(f"{URL}{march.pk}/").status_code == 401


def test_the_pdf_is_a_real_pdf_with_the_number_and_total(api_client_for, alice, march):
    response = api_client_for(alice).get(f"{URL}{march.pk}/pdf", HTTP_ACCEPT="application/pdf")
    assert response.status_code == 200
    assert response["Content-Type"] == "application/pdf"
    assert f'filename="{march.number}.pdf"' in response["Content-Disposition"]
    assert response.content.startswith(b"%PDF")
    text = "".join(page.extract_text() for page in PdfReader(io.BytesIO(response.content)).pages)
    assert march.number in text and "306.70" in text and "A100 GPU time beyond the Pro plan" in text


def test_the_csv_has_every_line_and_the_totals(api_client_for, alice, march):
    response = api_client_for(alice).get(f"{URL}{march.pk}/csv")
    assert response.status_code == 200 and response["Content-Type"].startswith("text/csv")
    rows = list(csv.DictReader(io.StringIO(response.content.decode())))
    assert [(row["kind"], row["amount"]) for row in rows] == [
        ("plan_fee", "299.00"),
        ("overage", "2.70"),
        ("nvme", "5.00"),
        ("subtotal", "306.70"),
        ("discount", "0.00"),
        ("credits", "0.00"),
        ("total", "306.70"),
    ]
    assert {row["invoice"] for row in rows} == {march.number}


def test_the_schema_documents_the_four_operations(client):
    schema = client.get("/api/schema/?format=json").json()
    operations = {
        operation["operationId"]
        for path, item in schema["paths"].items()
        if path.startswith("/api/v1/invoices/")
        for operation in item.values()
    }
    assert operations == {"invoices_list", "invoices_retrieve", "invoices_pdf", "invoices_csv"}
    pdf = schema["paths"]["/api/v1/invoices/{id}/pdf"]["get"]["responses"]["200"]["content"]
    assert "application/pdf" in pdf
    line = schema["components"]["schemas"]["InvoiceLine"]["properties"]
    assert line["amount"]["type"] == "string"
