from datetime import datetime, timedelta
from decimal import Decimal

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.decorators import login_required
from django.db.models import Count
from django.db.models.functions import TruncDate
from django.shortcuts import render
from django.urls import reverse
from django.utils import timezone

from accounts.access import role_required
from accounts.actions.plan_choice import offered_plans
from accounts.models import Role
from alerts.models import Alert
from billing.pricing import PricingError
from cluster.actions.further_nodes import current_nodes, shown_clusters
from cluster.models import Node, SyncRun
from credits.actions.grants import default_campaign
from credits.first_steps import first_steps
from credits.models import HeldGrant
from groups.models import Allocation
from jobs.models import Job, JobState
from plans.catalog import plan_for
from plans.rates import LIST_CARD, NoRateCard, rate_card_at
from reservations.models import Reservation
from reservations.models import State as ReservationState


def gpu_availability(nodes) -> list[dict]:
    """GPUs by type across usable nodes of every cluster: total, in use, free; and the same per
    cluster (`clusters`, the portal's own first) where there is more than one."""
    by_type: dict[str, dict] = {}
    for node in nodes:
        for group in node.gpus:
            entry = by_type.setdefault(
                group["type"], {"type": group["type"], "total": 0, "used": 0, "free": 0, "by_cluster": {}}
            )
            there = entry["by_cluster"].setdefault(node.cluster, {"name": node.cluster, "total": 0, "free": 0})
            used = len(group["used_indexes"])
            free = 0 if node.is_unavailable else group["count"] - used
            entry["total"] += group["count"]
            entry["used"] += used
            entry["free"] += free
            there["total"] += group["count"]
            there["free"] += free
    several = len({node.cluster for node in nodes}) > 1
    for entry in by_type.values():
        clusters = entry.pop("by_cluster")
        if several:
            entry["clusters"] = list(clusters.values())
    return sorted(by_type.values(), key=lambda entry: entry["type"])


def home(request):
    """The dashboard; to a signed-out visitor, the public landing page."""
    if not request.user.is_authenticated:
        return landing(request)
    return dashboard(request)


def landing(request):
    """What the pool offers, for anyone: its GPUs, the plans and their prices (from the
    catalogue, this month's), the free credits, and the way in."""
    campaign = default_campaign()
    gpus = gpu_availability(current_nodes())
    try:
        list_prices = rate_card_at(LIST_CARD)
    except NoRateCard:
        list_prices = None
    for entry in gpus:
        entry.update(settings.GPU_TYPES.get(entry["type"], {}))
        try:
            entry["price_per_hour"] = list_prices.gpu_price(entry["type"]) * 3600 if list_prices else None
        except PricingError:
            entry["price_per_hour"] = None
    context = {
        "gpus": gpus,
        "plans": offered_plans(),
        "credits": {
            "signup": campaign.signup_gpu_seconds,
            "tutorial": campaign.tutorial_gpu_seconds,
            "referral": campaign.referral_gpu_seconds,
        },
        "signup_hours": Decimal(campaign.signup_gpu_seconds) / 3600,
    }
    return render(request, "console/landing.html", context)


@login_required
def dashboard(request):
    nodes = list(Node.objects.all())
    context = {
        # Every cluster's GPUs, as the heatmap shows them; what waits for admins is the own's.
        "gpu_types": gpu_availability(current_nodes()),
        "recent_jobs": Job.objects.filter(owner=request.user).order_by("-created_at")[:10],
        "sync_runs": {run.name: run for run in SyncRun.objects.all()},
        "profile": request.user.profile,
        "plan": plan_for(request.user),
        "to_act_on": to_act_on(request.user.profile.role, nodes),
        # A new user's first steps (the credits that verifying brings, the tutorial); marketing
        # runs no jobs and has no credits tile.
        "first_steps": first_steps(request.user) if request.user.profile.role != Role.MARKETING else None,
    }
    return render(request, "console/home.html", context)


def to_act_on(role: str, nodes) -> list[dict]:
    """What waits for this role now, each with a count and the page that deals with it; only
    what is there (an empty list: nothing waits). A few COUNT queries, admins' and marketing's."""
    items = []
    if role == Role.ADMIN:
        waiting = Reservation.objects.filter(state__in=(ReservationState.REQUESTED, ReservationState.FAILED)).count()
        alerts = Alert.objects.filter(resolved_at__isnull=True).count()
        down = [node.name for node in nodes if node.is_unavailable]
        pending_jobs = Job.objects.filter(state=JobState.PENDING).count()
        allocations = Allocation.objects.filter(state=Allocation.State.REQUESTED).count()
        items += [
            _item(waiting, "reservation requests to approve or reject", "reservations:queue"),
            _item(allocations, "allocation requests of groups to decide", "groups:allocation_queue"),
            _item(alerts, "open alerts", "console:alerts"),
            _item(len(down), "nodes down or drained: " + ", ".join(down[:5]), "console:nodes"),
            _item(pending_jobs, "jobs waiting in the queue", "console:all_jobs"),
        ]
    elif role == Role.MARKETING:
        held = HeldGrant.objects.filter(state=HeldGrant.State.PENDING).count()
        items.append(_item(held, "held grants to review", "credits:marketing_review"))
    return [item for item in items if item["count"]]


def _item(count: int, label: str, url_name: str) -> dict:
    return {"count": count, "label": label, "url": reverse(url_name)}


@role_required(Role.ADMIN)
def nodes(request):
    return render(
        request,
        "console/nodes.html",
        {
            # Every cluster's, as the heatmap shows them (a further one's only while it is read).
            "nodes": current_nodes(),
            "clusters": 1 + len(shown_clusters()),
            "sync_runs": {run.name: run for run in SyncRun.objects.all()},
        },
    )


@role_required(Role.ADMIN)
def all_jobs(request):
    jobs = Job.objects.select_related("owner").order_by("-created_at")[:200]
    return render(request, "console/all_jobs.html", {"jobs": jobs})


SIGNUP_DAYS = 30


def signup_chart(counts: dict, today) -> dict:
    """Every day of the last SIGNUP_DAYS (today included), zero where nobody signed up, and the
    x-axis range those days cover: one day of data still draws on a 30-day axis, not on
    sub-millisecond ticks."""
    days = [today - timedelta(days=offset) for offset in range(SIGNUP_DAYS - 1, -1, -1)]
    half_day = timedelta(hours=12)
    first = datetime.combine(days[0], datetime.min.time()) - half_day
    last = datetime.combine(days[-1], datetime.min.time()) + half_day
    return {
        "days": [day.isoformat() for day in days],
        "counts": [counts.get(day, 0) for day in days],
        # Bars are centred on their day: half a day either side shows the first and last whole.
        "x_range": [first.isoformat(), last.isoformat()],
    }


@role_required(Role.MARKETING, Role.ADMIN)
def signups(request):
    today = timezone.localdate()
    since = timezone.make_aware(datetime.combine(today - timedelta(days=SIGNUP_DAYS - 1), datetime.min.time()))
    per_day = (
        get_user_model()
        .objects.filter(date_joined__gte=since)
        .annotate(day=TruncDate("date_joined"))
        .values("day")
        .annotate(count=Count("id"))
        .order_by("day")
    )
    rows = list(per_day)
    chart = signup_chart({row["day"]: row["count"] for row in rows}, today)
    return render(
        request,
        "console/signups.html",
        {"per_day": rows, "chart": chart, "since": since, "days": SIGNUP_DAYS},
    )
