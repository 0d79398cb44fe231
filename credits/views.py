"""A user's credits page and the campaign landing page (/r/<code>)."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse

from credits import fraud, tutorial
from credits.actions import ledger
from credits.actions.grants import default_campaign
from credits.middleware import browser_id
from credits.models import DEFAULT_CAMPAIGN_CODE, BurnWeight, Campaign, CreditAccount, HeldGrant, LedgerEntry
from credits.receivers import SESSION_CAMPAIGN, SESSION_REFERRER, request_address

ENTRIES_PER_PAGE = 50


def referral_link(request, account: CreditAccount, campaign_code: str = DEFAULT_CAMPAIGN_CODE) -> str:
    return request.build_absolute_uri(
        reverse("credits:landing", args=[campaign_code]) + f"?ref={account.referral_code}"
    )


@login_required
def credits_page(request):
    account = ledger.account_for(request.user.pk)
    # Credit past its expiry is written off before it is shown (the beat task does it too, on
    # its own clock): the balance and the entries under it then agree, and both are spendable.
    if ledger.has_due_expiry(request.user.pk) and ledger.expire_due(request.user.pk):
        account.refresh_from_db(fields=["balance"])
    entries = LedgerEntry.objects.filter(account=account).order_by("-created_at", "-id")
    before = request.GET.get("before", "")
    if before.isdigit():
        # Keyset paging: the same cost on the first page and the thousandth.
        anchor = LedgerEntry.objects.filter(account=account, pk=int(before)).values("created_at", "pk").first()
        if anchor:
            entries = entries.filter(created_at__lte=anchor["created_at"]).exclude(
                created_at=anchor["created_at"], pk__gte=anchor["pk"]
            )
    page = list(entries.select_related("campaign")[: ENTRIES_PER_PAGE + 1])
    older = page[ENTRIES_PER_PAGE].pk if len(page) > ENTRIES_PER_PAGE else None
    # The page's own row: the link to the tutorial template.
    template = tutorial.ensure_template(request.user.pk)
    weights = {}
    for row in BurnWeight.objects.order_by("gpu_type", "-effective_from"):
        weights.setdefault(row.gpu_type, row)
    return render(
        request,
        "credits/credits.html",
        {
            "balance": account.balance,
            "entries": page[:ENTRIES_PER_PAGE],
            "older": page[ENTRIES_PER_PAGE - 1].pk if older else None,
            "referral_link": referral_link(request, account),
            "tutorial_url": reverse("jobs:new") + f"?template={template.pk}",
            "tutorial_name": tutorial.TEMPLATE_NAME,
            "tutorial_summary": tutorial.SUMMARY,
            "tutorial_paid": LedgerEntry.objects.filter(idempotency_key=f"tutorial:{request.user.pk}").exists(),
            # Grants that wait for a person (a referral from the referrer's browser): said, not hidden.
            "held_grants": list(
                HeldGrant.objects.filter(user=request.user, state=HeldGrant.State.PENDING).values(
                    "grant_kind", "amount", "created_at"
                )
            ),
            "weights": list(weights.values()),
        },
    )


def landing(request, code: str):
    # The standing campaign is made when first needed (every user's referral link names it).
    campaign = default_campaign() if code == DEFAULT_CAMPAIGN_CODE else get_object_or_404(Campaign, code=code)
    closed = campaign.closed_reason()
    referral_code = request.GET.get("ref", "")[:32]
    referrer = (
        CreditAccount.objects.select_related("user").filter(referral_code=referral_code, user__isnull=False).first()
    )
    if request.user.is_authenticated:
        # A referrer opening their own link: where they are counts for the fraud rules.
        fraud.record_sighting(request.user.pk, request_address(request), browser_id(request))
    else:
        request.session[SESSION_CAMPAIGN] = campaign.code
        if referrer is not None:
            request.session[SESSION_REFERRER] = referrer.referral_code
        else:
            request.session.pop(SESSION_REFERRER, None)
    if request.method == "POST" and not request.user.is_authenticated:
        return redirect("account_signup")
    return render(
        request,
        "credits/landing.html",
        {"campaign": campaign, "closed": closed, "referrer": referrer.user.username if referrer else ""},
    )
