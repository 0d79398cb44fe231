"""Reservation pages: request (with a live availability check), my reservations and their
notices, one reservation, the week calendar per GPU type, and the admins' queue. Every write
goes through `reservations.actions`; these views only read forms and show outcomes."""

from __future__ import annotations

from datetime import UTC, date, datetime, time, timedelta
from urllib.parse import urlencode

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.db.models import Q
from django.http import Http404, JsonResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_POST

from accounts.access import is_admin, role_required
from accounts.models import Role
from cluster.records.hostlist import expand_hostlist
from foundation.ratelimit import hit
from plans.catalog import plan_for
from reservations import actions, capacity, forms
from reservations.models import HOLDING, Reservation, ReservationEvent, State

# The availability check may scan a week of starts for suggestions; a page fires it on
# every change of the form, a script hammering it should not.
AVAILABILITY_CHECKS_PER_MINUTE = 60
# How far the availability check looks for the nearest free starts (as actions.request does).
SUGGESTION_HORIZON = timedelta(days=7)
# The user's own reservations shown on the calendar: everything but the withdrawn ones.
OWN_ON_CALENDAR = (State.REQUESTED, State.APPROVED, State.ACTIVE, State.FINISHED, State.FAILED)


# Admins only: 403 to anyone else (accounts.access, the one rule for role pages).
admin_required = role_required(Role.ADMIN)


def _visible(user, pk: int) -> Reservation:
    """The owner's, a member's, or (for admins) any reservation; another user's is a 404,
    not a 403: its existence is not theirs to learn."""
    rows = Reservation.objects.select_related("user").prefetch_related("members")
    if not is_admin(user):
        rows = rows.filter(Q(user=user) | Q(members=user)).distinct()
    found = rows.filter(pk=pk).first()
    if found is None:
        raise Http404("No such reservation.")
    return found


def _placeholder_start() -> datetime:
    """A valid start (tomorrow, on the grid) standing in for an unreadable one while the
    rest of the form is checked."""
    return datetime.combine(timezone.now().date() + timedelta(days=1), time(10), tzinfo=UTC)


@login_required
def reservation_list(request):
    mine = Reservation.objects.filter(user=request.user).prefetch_related("members").order_by("-start", "-id")[:200]
    shared = Reservation.objects.filter(members=request.user).select_related("user").order_by("-start", "-id")[:50]
    unseen = ReservationEvent.objects.filter(reservation__user=request.user, seen_at__isnull=True)
    # Decisions are notices; the user's own request is not news to them.
    notices = list(unseen.exclude(to_state=State.REQUESTED).select_related("actor", "reservation")[:50])
    unseen.update(seen_at=timezone.now())
    context = {
        "reservations": mine,
        "shared": shared,
        "notices": notices,
        "is_admin": is_admin(request.user),
        "waiting": Reservation.objects.filter(state__in=(State.REQUESTED, State.FAILED)).count()
        if is_admin(request.user)
        else 0,
        "now": timezone.now(),
    }
    return render(request, "reservations/list.html", context)


@login_required
def reservation_detail(request, pk: int):
    reservation = _visible(request.user, pk)
    events = list(reservation.events.select_related("actor"))
    if reservation.user_id == request.user.pk:
        reservation.events.filter(seen_at__isnull=True).update(seen_at=timezone.now())
    context = {
        "reservation": reservation,
        "events": events,
        "is_owner": reservation.user_id == request.user.pk,
        "is_admin": is_admin(request.user),
        "can_cancel": reservation.is_cancellable and reservation.start > timezone.now(),
    }
    return render(request, "reservations/detail.html", context)


@login_required
def reservation_new(request):
    plan = plan_for(request.user)
    grid = settings.RESERVATION_GRID_MINUTES
    tomorrow = timezone.now().date() + timedelta(days=1)
    values = {
        "gpu_count": "1",
        "duration_minutes": "60",
        "start_date": tomorrow.isoformat(),
        "start_time": "10:00",
        "tz": "UTC",
    }
    errors: dict[str, list[str]] = {}
    suggestions = []
    if request.method == "GET":
        values.update(_prefill_from_calendar(request.GET))
    if request.method == "POST":
        values = {**values, **request.POST.dict()}
        data, errors = forms.request_data(request.POST, placeholder_start=_placeholder_start())
        if errors:
            # Check the fields that could be read too, so every mistake shows at once.
            try:
                actions.validate(request.user, data)
            except actions.ReservationError as exc:
                errors = {**exc.errors, **errors}
        else:
            try:
                reservation = actions.request(request.user, data)
            except actions.ReservationError as exc:
                errors, suggestions = exc.errors, exc.suggestions
            else:
                messages.success(request, f"Reservation #{reservation.pk} requested; an admin will decide.")
                return redirect("reservations:detail", pk=reservation.pk)
    context = {
        "values": values,
        "errors": errors,
        "other_errors": {field: msgs for field, msgs in errors.items() if field not in forms.FIELDS},
        "suggestions": suggestions,
        "gpu_types": [(name, info) for name, info in settings.GPU_TYPES.items() if plan.gpu_quota.get(name, 0) > 0],
        "plan": plan,
        "grid_minutes": grid,
        "grid_seconds": grid * 60,
        "may_reserve": plan.max_reservation_minutes > 0,
    }
    return render(request, "reservations/new.html", context, status=400 if errors else 200)


def _prefill_from_calendar(params) -> dict:
    """A calendar slot's link: the type and the start (UTC, shown in the browser's zone by the
    page's script). Anything unreadable is ignored: the form keeps its defaults."""
    prefill = {}
    if params.get("gpu_type") in settings.GPU_TYPES:
        prefill["gpu_type"] = params["gpu_type"]
    try:
        start = forms.parse_start(params.get("start", ""))
    except ValueError:
        return prefill
    prefill.update(start_date=start.date().isoformat(), start_time=start.strftime("%H:%M"), tz="UTC",
                   start_utc=start.isoformat())  # fmt: skip
    return prefill


@login_required
def availability_json(request):
    """Whether `count` GPUs of a type are free for a window (capacity minus approved
    reservations and maintenance holds, per node), and when not, the nearest free starts."""
    decision = hit("reservation-availability", str(request.user.pk), limit=AVAILABILITY_CHECKS_PER_MINUTE)
    if not decision.allowed:
        response = JsonResponse({"detail": f"Too many checks; try again in {decision.retry_after} s."}, status=429)
        response["Retry-After"] = str(decision.retry_after)
        return response
    params = request.GET
    errors: dict[str, list[str]] = {}
    gpu_type = params.get("gpu_type", "")
    if gpu_type not in settings.GPU_TYPES:
        errors["gpu_type"] = [f"One of {', '.join(settings.GPU_TYPES)}."]
    count = params.get("count", "")
    if not count.isdigit() or int(count) < 1:
        errors["gpu_count"] = ["A whole number of GPUs, at least 1."]
    duration = params.get("duration", "")
    longest = settings.RESERVATION_HORIZON_DAYS * 24 * 60
    if not duration.isdigit() or not 1 <= int(duration) <= longest:
        errors["duration_minutes"] = [f"Between 1 and {longest} minutes."]
    try:
        start = forms.parse_start(params.get("start", ""))
    except ValueError:
        errors["start"] = ["An ISO 8601 moment with its offset, e.g. 2026-12-07T10:00:00+01:00."]
    else:
        if start <= timezone.now():
            errors["start"] = ["The start must be in the future."]
    if errors:
        return JsonResponse({"errors": errors}, status=400)
    count, end = int(count), start + timedelta(minutes=int(duration))
    holds = actions.maintenance_holds()
    found = capacity.availability(gpu_type, start, end, maintenance=holds)
    available = found.free >= count
    suggestions = []
    # More than the pool has is never free: no point scanning a week for it.
    if not available and count <= found.capacity:
        suggestions = capacity.nearest_free_starts(
            gpu_type, count, start, end - start, step=timedelta(minutes=settings.RESERVATION_GRID_MINUTES),
            horizon=SUGGESTION_HORIZON, maintenance=holds,
        )  # fmt: skip
    return JsonResponse(
        {
            "gpu_type": gpu_type,
            "gpu_count": count,
            "start": start.isoformat(),
            "end": end.isoformat(),
            "available": available,
            "capacity": found.capacity,
            "free_gpus": found.free,
            "per_node_free": found.per_node_free,
            "suggestions": [moment.isoformat() for moment in suggestions],
        }
    )


@login_required
@require_POST
def reservation_cancel(request, pk: int):
    reservation = Reservation.objects.filter(pk=pk, user=request.user).first()
    if reservation is None:
        raise Http404("No such reservation.")
    try:
        actions.cancel(reservation.pk, request.user)
    except actions.StateError as exc:
        messages.error(request, str(exc))
    else:
        messages.success(request, f"Reservation #{reservation.pk} cancelled.")
    if request.POST.get("next") == "list":
        return redirect("reservations:list")
    return redirect("reservations:detail", pk=reservation.pk)


@admin_required
def queue(request):
    holds = actions.maintenance_holds()
    now = timezone.now()
    waiting = list(
        Reservation.objects.filter(state__in=(State.REQUESTED, State.FAILED))
        .select_related("user")
        .prefetch_related("members")
        .order_by("start", "id")
    )
    rows = []
    for reservation in waiting:
        found = capacity.availability(
            reservation.gpu_type, reservation.start, reservation.end, exclude_pk=reservation.pk, maintenance=holds
        )
        rows.append(
            {
                "reservation": reservation,
                "capacity": found.capacity,
                "free": found.free,
                "fits": found.free >= reservation.gpu_count,
                "per_node": sorted(found.per_node_free.items()),
                # A failed one whose window has begun can no longer be had as asked: no Retry.
                "begun": reservation.state == State.FAILED and reservation.start <= now,
            }
        )
    return render(request, "reservations/queue.html", {"rows": rows})


@admin_required
@require_POST
def reservation_approve(request, pk: int):
    if not Reservation.objects.filter(pk=pk).exists():
        raise Http404("No such reservation.")
    try:
        reservation = actions.approve(pk, request.user, request.POST.get("reason", ""))
    except actions.StateError as exc:
        messages.error(request, str(exc))
    else:
        if reservation.state == State.APPROVED:
            messages.success(request, f"Reservation #{pk} approved; Slurm holds it as {reservation.slurm_name}.")
        else:
            messages.error(request, f"Reservation #{pk} failed: {reservation.error}")
    return redirect("reservations:queue")


@admin_required
@require_POST
def reservation_reject(request, pk: int):
    if not Reservation.objects.filter(pk=pk).exists():
        raise Http404("No such reservation.")
    try:
        actions.reject(pk, request.user, request.POST.get("reason", ""))
    except actions.ReservationError as exc:
        messages.error(request, f"Reservation #{pk} not rejected: {' '.join(exc.errors.get('reason', [str(exc)]))}")
    except actions.StateError as exc:
        messages.error(request, str(exc))
    else:
        messages.success(request, f"Reservation #{pk} rejected.")
    return redirect("reservations:queue")


def _week_start(text: str | None) -> date:
    """The Monday of the week holding `text` (YYYY-MM-DD), or of this week."""
    try:
        day = date.fromisoformat(text) if text else timezone.now().date()
    except ValueError:
        day = timezone.now().date()
    return day - timedelta(days=day.weekday())


def _calendar_blocks(user, rows, holds, per_node: dict[str, int], week_start: datetime, week_end: datetime):
    """The week's blocks: the user's own reservations (with their state), everyone else's
    holding ones (named to admins only), and maintenance holds on nodes of the type."""
    admin = is_admin(user)
    blocks = []
    for reservation in rows:
        own = reservation.user_id == user.pk
        if own:
            label = f"#{reservation.pk} {reservation.gpu_count} GPU · {reservation.state}"
        elif admin:
            label = f"{reservation.user.get_username()} #{reservation.pk} {reservation.gpu_count} GPU"
        else:
            label = f"{reservation.gpu_count} GPU reserved"
        blocks.append(
            {
                "kind": "own" if own else "other",
                "start": reservation.start,
                "end": reservation.end,
                "label": label,
                "state": reservation.state,
                "holds": reservation.gpu_count if reservation.state in HOLDING else 0,
                "url": reverse("reservations:detail", args=[reservation.pk]) if own or admin else "",
            }
        )
    for hold in holds:
        nodes = [node for node in expand_hostlist(hold.nodes) if node in per_node]
        if "MAINT" not in hold.flags or not nodes:
            continue
        blocks.append(
            {
                "kind": "maintenance",
                # An open-ended hold holds the whole week shown.
                "start": hold.start_time or week_start,
                "end": hold.end_time or week_end,
                "label": f"maintenance {', '.join(nodes)}",
                "state": "maintenance",
                "holds": sum(per_node[node] for node in nodes),
                "url": "",
            }
        )
    return blocks


@login_required
def calendar(request):
    gpu_types = list(settings.GPU_TYPES)
    gpu_type = request.GET.get("gpu_type") or gpu_types[0]
    if gpu_type not in settings.GPU_TYPES:
        raise Http404("No such GPU type.")
    monday = _week_start(request.GET.get("week"))
    week_start = datetime.combine(monday, time(0), tzinfo=UTC)
    week_end = week_start + timedelta(days=7)
    per_node = capacity.gpus_per_node(gpu_type)
    total = sum(per_node.values())
    admin = is_admin(request.user)
    now, new_url = timezone.now(), reverse("reservations:new")
    plan = plan_for(request.user)
    may_reserve = plan.max_reservation_minutes > 0 and plan.gpu_quota.get(gpu_type, 0) > 0

    rows = (
        Reservation.objects.filter(gpu_type=gpu_type, start__lt=week_end, end__gt=week_start)
        .filter(Q(user=request.user, state__in=OWN_ON_CALENDAR) | Q(state__in=HOLDING))
        .select_related("user")
        .order_by("start", "id")
    )
    holding = [reservation for reservation in rows if reservation.state in HOLDING]
    holds = actions.maintenance_holds()
    blocks = _calendar_blocks(request.user, rows, holds, per_node, week_start, week_end)

    # The capacity rule's own answer for every hour of the week, over rows read once.
    free_by_hour = capacity.free_by_hour(gpu_type, per_node, holding, holds, week_start, days=7)
    days = []
    for offset in range(7):
        day_start = week_start + timedelta(days=offset)
        day_end = day_start + timedelta(days=1)
        hours = []
        for hour in range(24):
            slot_start = day_start + timedelta(hours=hour)
            slot_end = slot_start + timedelta(hours=1)
            items = [block for block in blocks if block["start"] < slot_end and block["end"] > slot_start]
            free = free_by_hour[offset * 24 + hour]
            hours.append({
                "start": slot_start, "items": items, "free": free,
                # A free slot ahead links to the request form with its type and start filled in.
                "reserve_url": f"{new_url}?{urlencode({'gpu_type': gpu_type, 'start': slot_start.isoformat()})}"
                if free and slot_start > now and may_reserve else "",
            })  # fmt: skip
        items = [block for block in blocks if block["start"] < day_end and block["end"] > day_start]
        days.append({"date": day_start.date(), "hours": hours, "items": items})
    hour_rows = [{"hour": hour, "cells": [day["hours"][hour] for day in days]} for hour in range(24)]
    context = {
        "gpu_type": gpu_type,
        "gpu_types": gpu_types,
        "capacity": total,
        "per_node": sorted(per_node.items()),
        "days": days,
        "hour_rows": hour_rows,
        "week": monday,
        "previous_week": monday - timedelta(days=7),
        "next_week": monday + timedelta(days=7),
        "is_admin": admin,
    }
    return render(request, "reservations/calendar.html", context)
