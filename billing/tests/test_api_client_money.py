"""The money side over the API with a client generated from the OpenAPI document, as a user's
script would use it: invoices (list, lines, the PDF) and the credit balance; another user's
invoice is a 404 through the same client."""

import importlib
from decimal import Decimal

import pytest
from django.contrib.auth import get_user_model

from accounts.models import ApiToken
from billing.actions.invoicing import issue_invoice
from billing.tests.invoice_support import at, charge
from credits.actions import ledger
from jobs.tests.test_api_client import PACKAGE, client_package, generate_client  # noqa: F401
from testing.servers import portal_stack

pytestmark = pytest.mark.django_db(transaction=True)


def test_invoices_and_credits_through_a_generated_client(alice, bob, client_package):  # noqa: F811
    first = charge(alice, at(2026, 10, 10), billable=3600, gpu_price=Decimal("0.0025"))
    invoice = issue_invoice(first.invoice_id)
    bobs = issue_invoice(charge(bob, at(2026, 10, 11), billable=60).invoice_id)
    ledger.grant(alice.pk, 5000, key="api-client-test", grant_kind="signup", campaign_id=None)
    _token, key = ApiToken.issue(alice, "generated client")
    with portal_stack() as base_url:
        generate_client(f"{base_url}/api/schema/?format=json", client_package)
        client_module = importlib.import_module(PACKAGE)
        api = {
            name: importlib.import_module(f"{PACKAGE}.api.{group}.{name}")
            for group, name in [
                ("invoices", "invoices_list"),
                ("invoices", "invoices_retrieve"),
                ("invoices", "invoices_pdf"),
                ("credits_", "credits_list"),  # "credits" is a builtin: the generator adds "_"
                ("billing", "billing_quote"),
            ]
        }
        client = client_module.AuthenticatedClient(base_url=base_url, token=key, raise_on_unexpected_status=True)

        listed = api["invoices_list"].sync(client=client)
        assert [item.number for item in listed.results] == [invoice.number]
        one = api["invoices_retrieve"].sync(client=client, id=invoice.pk)
        assert one.status.value == "issued" and Decimal(one.total) == Decimal("9.00")
        assert [line.kind.value for line in one.lines if Decimal(line.amount)] == ["gpu"]
        pdf = api["invoices_pdf"].sync_detailed(client=client, id=invoice.pk)
        assert pdf.status_code == 200 and pdf.content.startswith(b"%PDF")
        # Bob's invoice does not exist for Alice.
        theirs = api["invoices_retrieve"].sync_detailed(client=client, id=bobs.pk)
        assert theirs.status_code == 404
        credits = api["credits_list"].sync(client=client)
        assert credits.balance == 5000 and [entry.amount for entry in credits.entries] == [5000]
        # One quote for any job: a spot run pays each window's share, below the plan's price.
        models = importlib.import_module(f"{PACKAGE}.models")

        def quote(**fields):
            body = models.QuoteInput(gpu_type=models.GpuTypeEnum("a100"), gpu_count=2, seconds=7200, **fields)
            return api["billing_quote"].sync(client=client, body=body)

        plain, spot = quote(), quote(spot=True)
        assert Decimal(spot.total) < Decimal(plain.total) and spot.spot and not plain.spot
        assert spot.coverage.covered_gpu_seconds == 0 and plain.payer == "you"
    assert get_user_model().objects.count() == 2
