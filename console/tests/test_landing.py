"""The public landing page: what a signed-out visitor sees first, from the database."""

from decimal import Decimal

import pytest
from django.test import Client

from plans.models import Plan
from plans.rates import rate_card_at

pytestmark = pytest.mark.django_db


def test_a_signed_out_visitor_sees_the_pool_its_plans_prices_and_credits():
    Plan.objects.filter(code="pro").update(name="Pro Research")  # read from the catalogue, not written in
    page = Client().get("/")
    assert page.status_code == 200
    body = page.content.decode()
    assert "Pro Research" in body and "$299.00" in body and "a month" in body
    assert "5,000" in body and "10,000" in body  # sign-up and tutorial credits of the standing campaign
    assert 'href="/accounts/signup/"' in body and 'href="/accounts/login/"' in body
    assert rate_card_at("enterprise").gpu_second["h100"] == Decimal("0.004")
    assert "H100" in body and "0.004" in body  # Enterprise's per-second price, from its card in force


def test_a_signed_in_user_gets_the_dashboard(client, alice):
    client.force_login(alice)
    page = client.get("/")
    assert page.templates[0].name == "console/home.html"
