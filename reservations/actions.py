"""Every write about reservations: request, approve, reject, cancel, and the clock moving them
on. Views, the API and tasks call these; each change is a conditional UPDATE from the state
it was read in, leaves an event, and tells the owner on commit."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.mail import send_mail
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from accounts.models import Profile, Role
from audit.log import record
from cluster.clusters.reservation_gateway import reservation_gateway
from cluster.clusters.services import rest_client
from cluster.commands.reservation_request import GpuReservationRequest
from cluster.errors import SlurmError
from plans.catalog import plan_for
from reservations.capacity import availability, nearest_free_starts
from reservations.models import CANCELLABLE, CapacityLock, Reservation, ReservationEvent, State

log = logging.getLogger(__name__)
MAX_PURPOSE_CHARS = 2000
MAX_MEMBERS = 20


class ReservationError(ValueError):
    """Refused input: `errors` maps a field to its messages, as job specs do."""

    def __init__(self, errors: dict[str, list[str]], *, suggestions: list[datetime] | None = None):
        super().__init__("; ".join(f"{field}: {' '.join(messages)}" for field, messages in errors.items()))
        self.errors = errors
        self.suggestions = suggestions or []


class StateError(Exception):
    """The reservation is not in a state that allows this (someone else acted first)."""


@dataclass(frozen=True)
class RequestData:
    gpu_type: str
    gpu_count: int
    start: datetime
    duration_minutes: int
    purpose: str
    member_usernames: tuple[str, ...] = ()


def maintenance_holds():
    """Slurm's reservations, for the maintenance holds among them; none when Slurm cannot
    be asked (a request is still checked against the portal's own reservations)."""
    try:
        return rest_client().list_reservations()
    except SlurmError as exc:
        log.warning("maintenance holds not read: %s", exc)
        return []


def validate(user, data: RequestData, *, now: datetime | None = None) -> list:
    """Raise ReservationError naming every field that is wrong; return the members."""
    now = now or timezone.now()
    errors: dict[str, list[str]] = {}
    plan = plan_for(user)
    grid = settings.RESERVATION_GRID_MINUTES
    if plan.max_reservation_minutes <= 0:
        errors.setdefault("gpu_type", []).append(f"The {plan.name} plan does not include reservations.")
    allowed = plan.gpu_quota.get(data.gpu_type, 0)
    if data.gpu_type not in settings.GPU_TYPES:
        errors.setdefault("gpu_type", []).append(f"Unknown GPU type; the pool has {', '.join(settings.GPU_TYPES)}.")
    elif allowed <= 0:
        errors.setdefault("gpu_type", []).append(f"The {plan.name} plan does not include {data.gpu_type} GPUs.")
    elif not 1 <= data.gpu_count <= allowed:
        errors.setdefault("gpu_count", []).append(f"Between 1 and {allowed} {data.gpu_type} GPUs on your plan.")
    if data.start.tzinfo is None:
        errors.setdefault("start", []).append("Give the time zone (e.g. 2026-12-01T10:00:00+00:00).")
    else:
        if data.start <= now:
            errors.setdefault("start", []).append("The start must be in the future.")
        elif data.start > now + timedelta(days=settings.RESERVATION_HORIZON_DAYS):
            errors.setdefault("start", []).append(f"At most {settings.RESERVATION_HORIZON_DAYS} days ahead.")
        if data.start.second or data.start.microsecond or data.start.minute % grid:
            errors.setdefault("start", []).append(f"Starts fall on a {grid}-minute grid (e.g. 10:00, 10:{grid:02d}).")
    longest = plan.max_reservation_minutes
    if not grid <= data.duration_minutes <= max(longest, grid) or data.duration_minutes % grid:
        errors.setdefault("duration_minutes", []).append(
            f"A multiple of {grid} minutes, at most {longest} on your plan."
        )
    purpose = data.purpose.strip()
    if not purpose:
        errors.setdefault("purpose", []).append("Say what the GPUs are for; admins read it before approving.")
    elif len(purpose) > MAX_PURPOSE_CHARS:
        errors.setdefault("purpose", []).append(f"At most {MAX_PURPOSE_CHARS} characters.")
    members = _members(user, data.member_usernames, errors)
    if errors:
        raise ReservationError(errors)
    return members


def _members(user, usernames, errors) -> list:
    names = sorted({name.strip() for name in usernames if name.strip()} - {user.get_username()})
    if len(names) > MAX_MEMBERS:
        errors.setdefault("members", []).append(f"At most {MAX_MEMBERS} members.")
        return []
    found = list(
        get_user_model().objects.filter(username__in=names, is_active=True, profile__cluster_username__isnull=False)
    )
    missing = sorted(set(names) - {member.get_username() for member in found})
    if missing:
        errors.setdefault("members", []).append(f"No active portal users with cluster accounts: {', '.join(missing)}.")
    return found


def request(user, data: RequestData) -> Reservation:
    """Record a request (state requested). Refused when its GPUs are not free in the window,
    with the nearest free starts as suggestions."""
    members = validate(user, data)
    end = data.start + timedelta(minutes=data.duration_minutes)
    holds = maintenance_holds()
    found = availability(data.gpu_type, data.start, end, maintenance=holds)
    if found.free < data.gpu_count:
        # More than the pool has is never free: no point scanning a week for it.
        suggestions = [] if data.gpu_count > found.capacity else nearest_free_starts(
            data.gpu_type, data.gpu_count, data.start, end - data.start,
            step=timedelta(minutes=settings.RESERVATION_GRID_MINUTES), horizon=timedelta(days=7), maintenance=holds,
        )  # fmt: skip
        raise ReservationError(
            {"start": [f"{data.gpu_count} {data.gpu_type} GPUs are not free for that whole window."]},
            suggestions=suggestions,
        )
    with transaction.atomic():
        reservation = Reservation.objects.create(
            user=user,
            gpu_type=data.gpu_type,
            gpu_count=data.gpu_count,
            start=data.start,
            end=end,
            purpose=data.purpose.strip(),
        )
        reservation.members.set(members)
        _event(reservation, user, "", State.REQUESTED, "")
    return reservation


def approve(reservation_id: int, admin, reason: str = "") -> Reservation:
    """Check capacity under the GPU type's lock and create the Slurm reservation; on Slurm's
    refusal the request is failed with Slurm's words (an admin may try again). Either way the
    row and Slurm agree when this returns: the approval is never half done.

    Four eyes: an admin's own request is approved by another admin; where there is no other
    admin, by the lone admin with a reason, which the audit entry keeps (StateError otherwise)."""
    with transaction.atomic():
        reservation = Reservation.objects.select_for_update().get(pk=reservation_id)
        _check_not_self_approval(reservation, admin, reason)
        CapacityLock.objects.get_or_create(gpu_type=reservation.gpu_type)
        CapacityLock.objects.select_for_update().get(gpu_type=reservation.gpu_type)
        if reservation.state not in (State.REQUESTED, State.FAILED):
            raise StateError(f"Reservation {reservation.pk} is {reservation.state}, not waiting for approval.")
        if reservation.start <= timezone.now():
            return _fail(reservation, admin, "The start has passed; the user can request a new window.")
        holds = maintenance_holds()
        free = availability(
            reservation.gpu_type, reservation.start, reservation.end, exclude_pk=reservation.pk, maintenance=holds
        ).free
        if free < reservation.gpu_count:
            return _fail(reservation, admin, f"Only {free} {reservation.gpu_type} GPUs are free in that window now.")
        name = reservation.slurm_reservation_name()
        # Over REST on Slurm 26.05, with scontrol on 24.11: the same call.
        cli = reservation_gateway()
        try:
            cli.create_gpu_reservation(
                GpuReservationRequest(
                    name,
                    gpu_type=reservation.gpu_type,
                    count=reservation.gpu_count,
                    users=cluster_users(reservation),
                    start=reservation.start,
                    duration_minutes=reservation.duration_minutes,
                )
            )
        except (SlurmError, ValueError) as exc:
            # The admin and the user read words; the command and Slurm's text go to the audit log.
            words = exc.public_message if isinstance(exc, SlurmError) else str(exc)
            return _fail(reservation, admin, f"The reservation could not be made: {words}", detail=str(exc))
        try:
            held = cli.show_reservation(name)
        except SlurmError as exc:
            # Slurm holds the GPUs already: the approval stands; the nodes are filled in by
            # nobody, and capacity then counts it on the nodes with most room.
            log.warning("reservation %s made, but not read back: %s", name, exc)
            held = None
        Reservation.objects.filter(pk=reservation.pk).update(
            state=State.APPROVED, slurm_name=name, nodes=held.nodes if held else "", error=""
        )
        _event(reservation, admin, reservation.state, State.APPROVED, "")
        record(
            admin, "reservation.approve", f"reservation:{reservation.pk}", after={"slurm": name}, reason=reason.strip()
        )
    reservation.refresh_from_db()
    return reservation


def _check_not_self_approval(reservation: Reservation, admin, reason: str) -> None:
    if reservation.user_id != admin.pk:
        return
    other_admins = Profile.objects.filter(role=Role.ADMIN, user__is_active=True).exclude(user_id=admin.pk).exists()
    if other_admins:
        raise StateError(f"Reservation {reservation.pk} is your own request: another admin approves it.")
    if not reason.strip():
        raise StateError(
            f"Reservation {reservation.pk} is your own request and you are the only admin: approving it "
            "needs a reason, which the audit log keeps."
        )


def _fail(reservation: Reservation, admin, message: str, *, detail: str = "") -> Reservation:
    Reservation.objects.filter(pk=reservation.pk).update(state=State.FAILED, error=message[:2000])
    _event(reservation, admin, reservation.state, State.FAILED, message)
    record(
        admin,
        "reservation.approve",
        f"reservation:{reservation.pk}",
        succeeded=False,
        result=message,
        parameters={"slurm": detail[:2000]} if detail else None,
    )
    reservation.refresh_from_db()
    return reservation


def reject(reservation_id: int, admin, reason: str) -> Reservation:
    reason = reason.strip()
    if not reason:
        raise ReservationError({"reason": ["Say why; the user reads it."]})
    return _move(reservation_id, admin, (State.REQUESTED, State.FAILED), State.REJECTED, reason, "reservation.reject")


def cancel(reservation_id: int, user) -> Reservation:
    """The owner cancels before the start; an approved reservation leaves Slurm first, so a
    cancelled row never leaves GPUs held."""
    reservation = Reservation.objects.get(pk=reservation_id)
    if reservation.user_id != user.pk:
        raise StateError("Only the reservation's owner can cancel it.")
    if reservation.state not in CANCELLABLE or reservation.start <= timezone.now():
        raise StateError("Only a reservation that has not started can be cancelled.")
    if reservation.state == State.APPROVED:
        _release_in_slurm(reservation)
    return _move(reservation_id, user, CANCELLABLE, State.CANCELLED, "", "reservation.cancel")


def _release_in_slurm(reservation: Reservation) -> None:
    """An approved reservation leaves Slurm (already gone is fine); StateError when Slurm refuses."""
    try:
        reservation_gateway().delete_reservation(reservation.slurm_name)
    except SlurmError as exc:
        if "not found" not in exc.message and "invalid" not in exc.message.lower():
            raise StateError(f"Slurm did not release the GPUs: {exc.public_message}") from exc


def withdraw_beyond_plan(user_id: int) -> list[int]:
    """The user's reservations that have not started and that their plan now does not allow
    (no reservations, or not this long): cancelled, each saying why (the owner gets the usual
    e-mail). One approved under a plan the owner has left would hold GPUs for a plan that no
    longer includes them, at that plan's price (billing prices its unused time by the plan at
    approval). Raises StateError when Slurm does not release an approved one (retried)."""
    plan = plan_for(get_user_model().objects.get(pk=user_id))
    withdrawn = []
    for reservation in Reservation.objects.filter(user_id=user_id, state__in=CANCELLABLE, start__gt=timezone.now()):
        if 0 < reservation.duration_minutes <= plan.max_reservation_minutes:
            continue
        if reservation.state == State.APPROVED:
            _release_in_slurm(reservation)
        allowed = (
            f"reservations of at most {plan.max_reservation_minutes} min"
            if plan.max_reservation_minutes
            else "no reservations"
        )
        reason = f"Your plan is now {plan.name}, which includes {allowed}; reserve again under a plan that does."
        try:
            _move(reservation.pk, None, CANCELLABLE, State.CANCELLED, reason, "reservation.withdraw")
        except StateError:
            continue  # moved meanwhile (approved, started, cancelled by its owner)
        withdrawn.append(reservation.pk)
    return withdrawn


def _move(reservation_id, actor, from_states, to_state, reason, action) -> Reservation:
    with transaction.atomic():
        reservation = Reservation.objects.select_for_update().get(pk=reservation_id)
        if reservation.state not in from_states:
            raise StateError(f"Reservation {reservation.pk} is {reservation.state}.")
        Reservation.objects.filter(pk=reservation.pk).update(state=to_state)
        _event(reservation, actor, reservation.state, to_state, reason)
        record(actor, action, f"reservation:{reservation.pk}", before={"state": reservation.state},
               after={"state": to_state}, reason=reason)  # fmt: skip
    reservation.refresh_from_db()
    return reservation


def advance(now: datetime | None = None) -> int:
    """The clock's part: approved -> active at the start, active (or approved) -> finished at
    the end. Conditional, so two beat workers move each row once."""
    now = now or timezone.now()
    moved = 0
    for from_states, to_state, due in (
        ((State.APPROVED,), State.ACTIVE, {"start__lte": now, "end__gt": now}),
        ((State.APPROVED, State.ACTIVE), State.FINISHED, {"end__lte": now}),
    ):
        for reservation in Reservation.objects.filter(state__in=from_states, **due):
            with transaction.atomic():
                if Reservation.objects.filter(pk=reservation.pk, state=reservation.state).update(state=to_state):
                    _event(reservation, None, reservation.state, to_state, "")
                    moved += 1
    return moved


def cluster_users(reservation: Reservation) -> list[str]:
    owners = [reservation.user_id, *reservation.members.values_list("pk", flat=True)]
    names = Profile.objects.filter(user_id__in=owners, cluster_username__isnull=False).values_list(
        "cluster_username", flat=True
    )
    return sorted(names)


def _event(reservation: Reservation, actor, from_state: str, to_state: str, reason: str) -> None:
    ReservationEvent.objects.create(
        reservation=reservation,
        actor=actor if getattr(actor, "pk", None) else None,
        from_state=from_state,
        to_state=to_state,
        reason=reason,
    )
    if to_state != State.REQUESTED:
        pk = reservation.pk
        transaction.on_commit(lambda: notify(pk, to_state, reason))


def notify(reservation_id: int, state: str, reason: str) -> None:
    """E-mail the owner about a decision (the in-portal notice is the event itself)."""
    reservation = Reservation.objects.select_related("user").get(pk=reservation_id)
    if not reservation.user.email:
        return
    lines = [
        f"Your reservation #{reservation.pk} ({reservation.gpu_count} x {reservation.gpu_type}, "
        f"{reservation.start:%Y-%m-%d %H:%M} UTC for {reservation.duration_minutes} min) is now {state}.",
    ]
    if reason:
        lines.append(f"Reason: {reason}")
    lines.append(f"{settings.SITE_URL}/reservations/{reservation.pk}/")
    try:
        send_mail(f"Reservation #{reservation.pk}: {state}", "\n".join(lines), None, [reservation.user.email])
    except Exception:
        log.exception("could not e-mail the owner of reservation %s", reservation_id)


def usable_for_job(user, reservation_id, *, gpu_type: str, gpus: int, time_limit_minutes: int) -> Reservation:
    """The reservation a job of `user` may run in, or ReservationError on the `reservation`
    field: the user's own or shared with them, approved or active, the same GPU type, no more
    GPUs than it holds, and a time limit that ends with it (Slurm ends a running job when its
    reservation ends, ResvOverRun=0, so a longer limit would only be cut short)."""

    def refused(message: str) -> ReservationError:
        return ReservationError({"reservation": [message]})

    if isinstance(reservation_id, bool) or not str(reservation_id).isdigit():
        raise refused("Give the number of one of your reservations.")
    reservation = (
        Reservation.objects.filter(pk=int(reservation_id)).filter(Q(user=user) | Q(members=user)).distinct().first()
    )
    if reservation is None:
        raise refused("No such reservation of yours.")
    now = timezone.now()
    if reservation.state not in (State.APPROVED, State.ACTIVE) or reservation.end <= now:
        raise refused(f"Reservation #{reservation.pk} is {reservation.state}; jobs run only in an approved one.")
    if reservation.gpu_type != gpu_type or gpus > reservation.gpu_count:
        raise refused(f"Reservation #{reservation.pk} holds {reservation.gpu_count} x {reservation.gpu_type}.")
    left = int((reservation.end - max(now, reservation.start)).total_seconds() // 60)
    if time_limit_minutes > left:
        raise refused(f"Reservation #{reservation.pk} ends at {reservation.end:%H:%M} UTC: at most {left} minutes.")
    return reservation
