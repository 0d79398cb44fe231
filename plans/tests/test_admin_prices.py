"""An admin changes a plan's monthly price: the month under way keeps its price, the change is
billed from the next month, the admin is told so, and the history shows both prices."""

from datetime import date
from decimal import Decimal

import pytest
import time_machine
from django.test import Client
from django.utils import timezone

from audit.models import AuditLog
from plans.models import Plan, PlanPrice
from testing.admin_forms import change_form_data

pytestmark = pytest.mark.django_db


def test_a_price_changed_in_the_admin_is_billed_from_the_next_month(admin_user):
    admin_user.is_staff = admin_user.is_superuser = True
    admin_user.save()
    client = Client()
    client.force_login(admin_user)
    pro = Plan.objects.get(code="pro")
    url = f"/django-admin/plans/plan/{pro.pk}/change/"
    with time_machine.travel(timezone.datetime(2026, 3, 10, 12, tzinfo=timezone.get_current_timezone())):
        page = client.get(url)
        assert "billed from the next billing month" in page.content.decode()
        data = {**change_form_data(page), "monthly_price": "349.00"}
        response = client.post(url, data, follow=True)
    errors = response.context.get("errors") if response.context else None
    assert response.status_code == 200 and not errors, errors
    assert "billed from 1 April 2026" in response.content.decode()
    pro.refresh_from_db()
    assert pro.monthly_price == Decimal("349.00")
    assert list(PlanPrice.objects.filter(plan=pro).values_list("effective_from", "monthly_price")) == [
        (date(2026, 4, 1), Decimal("349.00")),
        (date(2000, 1, 1), Decimal("299.00")),
    ]
    assert AuditLog.objects.filter(action="plan.change", target="plan:pro").exists()
