"""Records only the portal's actions write (ledgers, invoices, plan history, decided allocations)
are read in the admin and changed nowhere there, not even by a superuser."""

import pytest
from django.contrib import admin
from django.test import RequestFactory

from billing.models import Invoice
from credits.models import LedgerEntry
from groups.models import Allocation
from plans.models import Subscription

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("model", [Invoice, LedgerEntry, Subscription, Allocation])
def test_the_admin_shows_and_never_changes_an_action_written_record(model, django_user_model):
    request = RequestFactory().get("/admin/")
    request.user = django_user_model.objects.create_superuser("root", "root@example.org", "pw")
    model_admin = admin.site._registry[model]
    assert model_admin.has_view_permission(request)
    assert not model_admin.has_add_permission(request)
    assert not model_admin.has_change_permission(request)
    assert not model_admin.has_delete_permission(request)
