"""The usage page in Chromium, at desktop and at phone width: the stacked bars are drawn (one
trace per GPU type), switch to GPU-hours, and the page does not scroll sideways."""

from datetime import timedelta
from decimal import Decimal

import pytest
from django.utils import timezone

from billing.invoices.drafts import month_bounds, month_of
from billing.tests.usage_records import record
from testing.browser import chromium_page, log_in
from testing.servers import daphne_server

playwright_api = pytest.importorskip("playwright.sync_api")

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.mark.parametrize("width, height", [(1280, 900), (390, 844)], ids=["desktop", "phone"])
def test_the_usage_page_draws_its_chart(alice, bob, width, height):
    # The portal runs in its own process on the real clock: records of its current month.
    start, _end = month_bounds(month_of(timezone.now()))
    record(alice, start + timedelta(hours=2), seconds=3600, amount_gpu=Decimal("5.4"))
    record(alice, start + timedelta(hours=3), seconds=1800, gpu_type="rtx4090", amount_gpu=Decimal("0.6"))
    record(bob, start + timedelta(hours=3), seconds=1800, gpu_type="h100", amount_gpu=Decimal("9"))
    with chromium_page(playwright_api, width=width, height=height) as page, daphne_server() as base_url:
        log_in(page, base_url, "alice", "pw-alice")
        page.goto(f"{base_url}/billing/usage/")
        chart = page.locator("#usage-chart")
        playwright_api.expect(chart).to_have_attribute("data-drawn", "charges", timeout=10000)
        # Plotly draws one bar trace per GPU type: alice's two, never bob's h100.
        assert chart.locator(".barlayer .trace").count() == 2
        legend = chart.locator(".legend").text_content()
        assert "a100" in legend and "rtx4090" in legend and "h100" not in legend
        assert page.locator("[data-figure=charges] .tile-figure").inner_text() == "$6.00"
        page.click("[data-show=gpu_hours]")
        playwright_api.expect(chart).to_have_attribute("data-drawn", "gpu_hours")
        assert "GPU-hours" in chart.locator(".ytitle").text_content()
        box = chart.bounding_box()
        assert box["width"] <= width and box["height"] >= 300
        assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
