"""Marketing's console: campaigns (create, figures per campaign and over time, CSV of every
table) and the review queue of held grants. Marketing accounts only; others get 403."""

from __future__ import annotations

import csv

from django import forms
from django.contrib import messages
from django.http import Http404, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_POST

from accounts.access import role_required
from accounts.models import Role
from credits import actions as credit_actions
from credits import marketing_figures as figures
from credits.actions import grants
from credits.actions.campaigns import FIELDS, ApprovalRefused, terms_errors
from credits.models import Campaign, HeldGrant

marketing_only = role_required(Role.MARKETING)


class CampaignForm(forms.ModelForm):
    class Meta:
        model = Campaign
        fields = list(FIELDS)
        widgets = {
            "start": forms.DateTimeInput(attrs={"type": "datetime-local"}, format="%Y-%m-%dT%H:%M"),
            "end": forms.DateTimeInput(attrs={"type": "datetime-local"}, format="%Y-%m-%dT%H:%M"),
        }
        help_texts = {
            "code": "The link is /r/<code>",
            "budget_gpu_seconds": "The credits this campaign may grant in all",
            "per_referrer_cap": "The most referral grants one referrer receives",
        }

    def clean(self):
        cleaned = super().clean()
        start, end = cleaned.get("start"), cleaned.get("end")
        if start and end and end <= start:
            self.add_error("end", "must be after the start")
        for name, message in terms_errors(cleaned).items():
            if name not in self.errors:
                self.add_error(name, message)
        return cleaned


def _csv(filename: str, header: list[str], rows) -> HttpResponse:
    response = HttpResponse(content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="{filename}"'
    writer = csv.writer(response)
    writer.writerow(header)
    for row in rows:
        # A cell that starts like a formula is read as text by spreadsheets.
        writer.writerow(["'" + cell if isinstance(cell, str) and cell[:1] in "=+-@" else cell for cell in row])
    return response


def _campaign_rows(price):
    totals = figures.totals_by_campaign()
    for campaign in Campaign.objects.all():
        total = totals.get(campaign.pk, figures.Totals())
        yield {
            "campaign": campaign,
            "totals": total,
            "liability": figures.dollars(total.outstanding, price),
            "cost_per_activated": figures.dollars(total.granted_per_activated, price),
        }


CAMPAIGN_HEADER = [
    "code", "name", "start", "end", "signups", "verified", "activated", "granted", "spent", "expired",
    "outstanding", "liability_usd", "granted_per_activated", "cost_per_activated_usd",
]  # fmt: skip


@marketing_only
def campaigns(request):
    price = figures.credit_price()
    form = CampaignForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        campaign = credit_actions.create_campaign(request.user, form.cleaned_data)
        messages.success(request, f"Campaign {campaign.name} created: its link is /r/{campaign.code}")
        return redirect("credits:marketing_campaign", pk=campaign.pk)
    rows = list(_campaign_rows(price))
    if request.GET.get("format") == "csv":
        return _csv(
            "campaigns.csv",
            CAMPAIGN_HEADER,
            (
                [
                    row["campaign"].code,
                    row["campaign"].name,
                    row["campaign"].start.isoformat(),
                    row["campaign"].end.isoformat() if row["campaign"].end else "",
                    row["totals"].signups,
                    row["totals"].verified,
                    row["totals"].activated,
                    row["totals"].granted,
                    row["totals"].spent,
                    row["totals"].expired,
                    row["totals"].outstanding,
                    row["liability"],
                    row["totals"].granted_per_activated,
                    row["cost_per_activated"],
                ]  # fmt: skip
                for row in rows
            ),
        )
    over_time = figures.per_day()
    return render(
        request,
        "credits/marketing_campaigns.html",
        {
            "rows": rows,
            "form": form,
            "price": price,
            "over_time": over_time,
            "chart": _chart(over_time),
            "pending": HeldGrant.objects.filter(state=HeldGrant.State.PENDING).count(),
        },
    )


def _chart(days: list[dict]) -> dict:
    return {
        "days": [row["day"].isoformat() for row in days],
        **{name: [row[name] for row in days] for name in figures.FIGURES},
    }


TABLES = ("days", "retention", "members")


@marketing_only
def campaign_detail(request, pk: int, table: str = ""):
    campaign = get_object_or_404(Campaign, pk=pk)
    price = figures.credit_price()
    days = figures.per_day(campaign.pk, days=365)
    retention = figures.retention(campaign.pk)
    members = figures.members(campaign.pk)
    if table:
        if table not in TABLES:
            raise Http404("No such table.")
        name = f"{campaign.code}-{table}.csv"
        if table == "days":
            return _csv(
                name, ["day", *figures.FIGURES], ([row["day"], *[row[f] for f in figures.FIGURES]] for row in days)
            )
        if table == "retention":
            return _csv(
                name,
                ["signup_day", "signups", "ran_a_job_days_1_to_7", "share_percent", "final"],
                ([row["day"], row["signups"], row["kept"], row["share"], row["final"]] for row in retention),
            )
        return _csv(
            name,
            ["username", "referrer", "signed_up_at", "verified_at", "activated_at", "held_for_review", "no_grants"],
            (
                [
                    m["user__username"],
                    m["referrer__username"] or "",
                    m["signed_up_at"],
                    m["verified_at"] or "",
                    m["activated_at"] or "",
                    m["review_reason"],
                    m["grants_refused"],
                ]  # fmt: skip
                for m in members
            ),
        )
    totals = figures.totals_of(campaign.pk)
    return render(
        request,
        "credits/marketing_campaign.html",
        {
            "campaign": campaign,
            "closed": campaign.closed_reason(),
            "link": request.build_absolute_uri(reverse("credits:landing", args=[campaign.code])),
            "totals": totals,
            "price": price,
            "liability": figures.dollars(totals.outstanding, price),
            "cost_per_activated": figures.dollars(totals.granted_per_activated, price),
            "days": days,
            "chart": _chart(days),
            "retention": retention,
            "retention_definition": figures.RETENTION_DEFINITION,
            "members": members,
        },
    )


@require_POST
@marketing_only
def campaign_approve(request, pk: int):
    campaign = get_object_or_404(Campaign, pk=pk)
    try:
        credit_actions.approve_campaign(campaign.pk, request.user)
    except ApprovalRefused as exc:
        messages.error(request, str(exc))
    else:
        messages.success(request, f"{campaign.name}'s budget is approved; it grants credits now.")
    return redirect("credits:marketing_campaign", pk=campaign.pk)


@marketing_only
def review_queue(request):
    held = HeldGrant.objects.select_related("user", "campaign").filter(state=HeldGrant.State.PENDING)
    decided = HeldGrant.objects.select_related("user", "campaign", "decided_by").exclude(state=HeldGrant.State.PENDING)
    if request.GET.get("format") == "csv":
        return _csv(
            "held-grants.csv",
            ["id", "username", "campaign", "kind", "amount", "reason", "state", "decided_by", "decided_at"],
            (
                [
                    h.pk,
                    h.user.username,
                    h.campaign.code,
                    h.grant_kind,
                    h.amount,
                    h.reason,
                    h.state,
                    h.decided_by.username if h.decided_by else "",
                    h.decided_at or "",
                ]  # fmt: skip
                for h in [*held, *decided.order_by("-decided_at")[:500]]
            ),
        )
    return render(
        request, "credits/marketing_review.html", {"held": held, "decided": decided.order_by("-decided_at")[:50]}
    )


@require_POST
@marketing_only
def review_decide(request, pk: int):
    decision = request.POST.get("decision")
    if decision not in ("approve", "reject"):
        messages.error(request, "Choose approve or reject.")
        return redirect("credits:marketing_review")
    try:
        held = credit_actions.decide_held_grant(
            pk, approve=decision == "approve", actor=request.user, note=request.POST.get("note", "")
        )
    except HeldGrant.DoesNotExist:
        raise Http404("No such held grant.") from None
    except grants.ReviewError as exc:
        messages.error(request, str(exc))
    else:
        messages.success(request, f"Grant {held.pk} to {held.user.username}: {held.get_state_display().lower()}.")
    return redirect("credits:marketing_review")
