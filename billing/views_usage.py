"""The user's own money pages: the month's usage (/billing/usage) and the budget
(/billing/budget). Everything here is the signed-in user's own; nobody else's is reachable."""

from __future__ import annotations

from datetime import timedelta

from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.shortcuts import redirect, render
from django.utils import timezone

from billing.actions import budgets
from billing.digests import digest_of, ended_in_week
from billing.models import Budget
from billing.usage.usage_page import month_usage
from telemetry.efficiency import summary


@login_required
def usage(request):
    month = month_usage(request.user)
    now = timezone.now()
    context = {
        "month": month,
        "chart": month.chart(),
        # The weekly digest's figures (billing/digests.py), and the last 30 days by GPU type.
        "week": digest_of(ended_in_week(now).filter(owner=request.user)),
        "by_gpu_type": summary("gpu_type", now - timedelta(days=30), now, owner_id=request.user.pk),
    }
    return render(request, "billing/usage.html", context)


class BudgetForm(forms.Form):
    monthly_amount = forms.DecimalField(
        label="Monthly budget (USD)", min_value=1, max_digits=12, decimal_places=2, help_text="At least $1"
    )
    hold_at_limit = forms.BooleanField(
        label="Hold new job submissions once the budget is spent", required=False, initial=False
    )


@login_required
def budget(request):
    current = Budget.objects.filter(user=request.user).first()
    if request.method == "POST" and request.POST.get("action") == "clear":
        if budgets.clear_budget(request.user):
            messages.success(request, "Budget cleared: no e-mails, no hold.")
        return redirect("billing:budget")
    if request.method == "POST":
        form = BudgetForm(request.POST)
        if form.is_valid():
            saved = budgets.save_budget(
                request.user, form.cleaned_data["monthly_amount"], form.cleaned_data["hold_at_limit"]
            )
            # Already past 80 % or 100 %: say so now rather than at the next pass.
            budgets.check_budget(request.user.pk)
            messages.success(request, f"Budget set to ${saved.monthly_amount} a month.")
            return redirect("billing:budget")
    else:
        initial = {"monthly_amount": current.monthly_amount, "hold_at_limit": current.hold_at_limit} if current else {}
        form = BudgetForm(initial=initial)
    month = month_usage(request.user)
    return render(
        request,
        "billing/budget.html",
        {"form": form, "budget": current, "month": month},
        status=400 if form.errors else 200,
    )
