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

pytestmark = pytest.mark.django_db


def _post_data(response) -> dict:
    """The change form's own values, inline formsets included, as the browser would send them."""
    data = {}
    form = response.context["adminform"].form
    for name, field in form.fields.items():
        value = form.initial.get(name, field.initial)
        if isinstance(value, bool):
            if value:
                data[name] = "on"
        elif value is not None:
            data[name] = value
    for inline in response.context["inline_admin_formsets"]:
        formset = inline.formset
        for key, value in formset.management_form.initial.items():
            data[f"{formset.prefix}-{key}"] = value
        for subform in formset.forms:
            for name in subform.fields:
                value = subform.instance.pk if name == "id" else subform.initial.get(name)
                if value is not None and not isinstance(value, bool):
                    data[subform.add_prefix(name)] = getattr(value, "pk", value)
    return data


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
        data = {**_post_data(page), "monthly_price": "349.00"}
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
