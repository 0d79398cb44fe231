"""The audit log page, admins only: every consequential action, filtered and paginated."""

from __future__ import annotations

from datetime import datetime, time, timedelta

from django import forms
from django.core.paginator import Paginator
from django.shortcuts import render
from django.utils import timezone

from accounts.access import role_required
from accounts.models import Role
from audit.models import AuditLog

PAGE_SIZE = 50
SUCCEEDED_CHOICES = [("", "Any outcome"), ("yes", "Succeeded"), ("no", "Failed")]


class AuditFilterForm(forms.Form):
    action = forms.ChoiceField(required=False)
    actor = forms.CharField(required=False, max_length=150, label="Who")
    target = forms.CharField(required=False, max_length=200)
    date_from = forms.DateField(required=False, label="From", widget=forms.DateInput(attrs={"type": "date"}))
    date_to = forms.DateField(required=False, label="To", widget=forms.DateInput(attrs={"type": "date"}))
    succeeded = forms.ChoiceField(required=False, choices=SUCCEEDED_CHOICES, label="Outcome")

    def __init__(self, *args, actions: list[str], **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["action"].choices = [("", "Any action"), *((name, name) for name in actions)]

    def clean(self):
        data = super().clean()
        if data.get("date_from") and data.get("date_to") and data["date_from"] > data["date_to"]:
            raise forms.ValidationError("The range ends before it starts.")
        return data


def _local_midnight(day) -> datetime:
    return timezone.make_aware(datetime.combine(day, time.min))


def filter_entries(queryset, data: dict):
    """`data` is a form's cleaned data; empty fields do not filter."""
    if data.get("action"):
        queryset = queryset.filter(action=data["action"])
    if data.get("actor"):
        queryset = queryset.filter(actor_name__icontains=data["actor"].strip())
    if data.get("target"):
        queryset = queryset.filter(target__icontains=data["target"].strip())
    if data.get("date_from"):
        queryset = queryset.filter(created_at__gte=_local_midnight(data["date_from"]))
    if data.get("date_to"):
        # Whole days in the portal's time zone: "to 30 Nov" includes all of 30 Nov.
        queryset = queryset.filter(created_at__lt=_local_midnight(data["date_to"] + timedelta(days=1)))
    if data.get("succeeded"):
        queryset = queryset.filter(succeeded=data["succeeded"] == "yes")
    return queryset


def changes(entry: AuditLog) -> list[tuple[str, object, object]]:
    """(field, before, after) for every key either side names, in a stable order."""
    before, after = entry.before or {}, entry.after or {}
    return [(key, before.get(key, ""), after.get(key, "")) for key in sorted(set(before) | set(after))]


@role_required(Role.ADMIN)
def audit_log(request):
    actions = list(AuditLog.objects.order_by("action").values_list("action", flat=True).distinct())
    form = AuditFilterForm(request.GET or None, actions=actions)
    entries = AuditLog.objects.all()
    if form.is_bound:
        form.is_valid()
        # A bad field is shown as an error; the fields that are good still filter.
        valid = {name: value for name, value in getattr(form, "cleaned_data", {}).items() if name not in form.errors}
        entries = filter_entries(entries, valid)
    page = Paginator(entries, PAGE_SIZE).get_page(request.GET.get("page"))
    query = request.GET.copy()
    query.pop("page", None)
    rows = [{"entry": entry, "changes": changes(entry)} for entry in page.object_list]
    return render(
        request,
        "console/audit.html",
        {"form": form, "page": page, "rows": rows, "query": query.urlencode(), "page_size": PAGE_SIZE},
    )
