"""Invoices in Chromium at desktop and phone width: the list, one invoice with its lines and
total, the PDF link; the page never scrolls sideways; another user's invoice is a 404."""

from decimal import Decimal

import pytest

from billing.actions.invoicing import issue_invoice
from billing.tests.invoice_support import at, charge
from testing.browser import chromium_page, log_in
from testing.servers import daphne_server

playwright_api = pytest.importorskip("playwright.sync_api")

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.mark.parametrize("width, height", [(1280, 900), (390, 844)], ids=["desktop", "phone"])
def test_a_user_reads_their_invoice(alice, bob, width, height):
    invoice = issue_invoice(charge(alice, at(2026, 10, 10), billable=3600, gpu_price=Decimal("0.0025")).invoice_id)
    theirs = issue_invoice(charge(bob, at(2026, 10, 11), billable=60).invoice_id)
    with chromium_page(playwright_api, width=width, height=height) as page, daphne_server() as base_url:
        log_in(page, base_url, "alice", "pw-alice")
        page.goto(f"{base_url}/billing/invoices/")
        assert invoice.number in page.content() and theirs.number not in page.content()
        page.click(f"a[href='/billing/invoices/{invoice.pk}/']")  # the month links to the invoice
        page.wait_for_url(f"{base_url}/billing/invoices/{invoice.pk}/")
        body = page.locator("main").inner_text()
        assert "9.00" in body  # 3,600 A100-seconds at $0.0025
        assert page.locator(f"a[href='/billing/invoices/{invoice.pk}/pdf']").count() == 1
        assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
        # Every line's Amount lies inside the viewport, no sideways scroll within the table either.
        amounts = page.locator("[data-amount]")
        assert amounts.count() >= 1
        for index in range(amounts.count()):
            box = amounts.nth(index).bounding_box()
            assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= width, box
        missing = page.goto(f"{base_url}/billing/invoices/{theirs.pk}/")
        assert missing.status == 404
