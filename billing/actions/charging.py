"""Charging one usage record to its payer's draft invoice: what covers it, and what it comes to.

The payer: the group the run was charged to (`UsageRecord.group`, its Slurm account) when that
group held a plan at the run's start (groups.group_plans), else the user. A group pays under
its plan, with the plan's included hours shared by its members (counted on the group's draft)
and its credit pool; its invoice lists the runs per member and GPU type.

`charge(record_id)` runs right after metering writes a record (billing/usage/metering.py) and is
idempotent: a record already on an invoice is left alone. Inside one transaction it locks the
draft of the month the run ended in (billing.invoices.drafts.open_draft: a month already issued sends
it to the next open month), then the record, and sets the plan, the rate card, the prices,
the split and the amounts once.

Prices: the dearer of the plan the user held when the portal took the job (for a reservation's
unused time: when it was approved) and the plan held when the run started (plans.catalog.
plans_to_price, billing/charge_split.py `dearest`: a plan changed while the run waited or ran
never makes it cheaper), and the rate card that plan pays (`Plan.rate_card`: "list", or
"enterprise" for Enterprise) in force at the run's start (plans.rates.rates_for_plan). The
record keeps the card and its prices, so a later card never reprices it.

What covers a run, in this order (its "GPU-seconds to cover": whole GPUs x seconds):
1. the plan's included hours of the run's GPU type this month: hours x 3600 minus what the
   records already charged to this draft took of them (the draft's lock orders this);
2. credits (`apply_credits`, the seam to credits.actions.spend; idempotency key per record);
3. the rest is billable.
The split and the amounts are billing/charge_split.py's, the one rule every path prices by: GPU
= billable GPU-seconds x the GPU price; GPU memory = the memory GB-seconds of the billable share
(GB-s x billable / covered total) x the memory price; NVMe = the GB above the plan's included
NVMe (`included_nvme_gb`, a cache size, not a monthly pool) x seconds, of the billable share, x
the NVMe price per GB-hour / 3600. A share is one division carried to 12 places half-up; a run with nothing
covered has no division (its amounts are pricing.quote's lines exactly: the article's run
comes to $8.564).

Shard runs (GPU memory, no whole GPU; gpu_count 0): priced by their memory GB-seconds (shards
x GB per shard x seconds) at the memory price, recorded as their "GPU price". They draw on
the plan's included hours only when the plan includes hours of that GPU type, as GPU-second
equivalents (shards / shards per GPU x seconds, rounded down): a Pro user's 3-shard A100 run
of an hour takes 1,080 s of the 100 A100-hours, and what the hours do not cover is billed as
memory. Credits are whole GPU-seconds and are not spent on shard runs.

Spot runs (the spot QOS): a share of the GPU price by time window, no included hours or credits;
billing/spot.py says which seconds are billed (a preempted run's notice, when the pool took the
GPUs back) and how they fall in the windows.

Free plan (included hours are a cap): nothing is billed, ever; the whole run is recorded as
included, and a run beyond the cap (slurmdbd late, or Slurm's own limit rounding) says so in
`note`.
"""

from __future__ import annotations

import logging
from dataclasses import replace

from django.conf import settings
from django.db import transaction
from django.db.models import Sum
from django.utils import timezone

from billing.charge_split import RunShape, Terms, credits_wanted, dearest, split, spot_note
from billing.invoices.drafts import open_draft
from billing.models import UsageRecord
from billing.models.usage import RESERVATION_CLUSTER
from billing.pricing import SECONDS_PER_HOUR, PricingError, Rates
from billing.spot import is_spot, spot_seconds, unbilled_grace_seconds
from credits import actions as credit_actions
from credits.actions import ledger
from credits.weights import NoBurnWeight
from groups.group_plans import GroupPlansHeld
from plans.catalog import PlansHeld, PlanSnapshot, plans_to_price
from plans.models import RateCard
from plans.rates import CardBook, NoRateCard
from reservations.models import ReservationEvent, State

log = logging.getLogger(__name__)


class ChargeError(Exception):
    """A record that cannot be priced (no rate card, no price for its GPU type): left
    uncharged, and retried by the next metering pass."""


def apply_credits(
    user_id: int, gpu_type: str, gpu_seconds: int, idempotency_key: str, *, job_uuid=None, group_id=None
) -> tuple[int, int | None]:
    """GPU-seconds of `gpu_type` that the user's credits cover, up to `gpu_seconds`, and the
    credits ledger's spend entry id: (0, None) without credits (credits.actions.spend takes at
    most the balance, once per key). The spend names the job (`job_reference`), so the job page
    lists it. Runs inside charge()'s transaction, so a charge that fails spends nothing.
    `group_id`: the group pays, from its credit pool."""
    if gpu_seconds <= 0:
        return 0, None
    reference = ledger.job_reference(job_uuid) if job_uuid else ""
    try:
        entry = credit_actions.spend(
            user_id,
            gpu_seconds,
            gpu_type=gpu_type,
            idempotency_key=idempotency_key,
            reference=reference,
            group_id=group_id,
        )
    except NoBurnWeight as exc:  # credits do not pay for this GPU type
        log.info("credits do not cover %s: %s", gpu_type, exc)
        return 0, None
    if entry is None:
        return 0, None
    return min(max(0, entry.covered_gpu_seconds), gpu_seconds), entry.pk


def _included_left(invoice_id: int, gpu_type: str, included_hours: int) -> int:
    if included_hours <= 0:
        return 0
    used = (
        UsageRecord.objects.filter(invoice_id=invoice_id, gpu_type=gpu_type).aggregate(
            used=Sum("included_gpu_seconds")
        )["used"]
        or 0
    )
    return max(0, included_hours * SECONDS_PER_HOUR - used)


def run_shape(record: UsageRecord) -> RunShape:
    """The shape the charge split prices: a metered run as slurmdbd and telemetry saw it, and for
    a spot run the seconds it is billed for, by window."""
    shards_per_gpu = int(settings.GPU_TYPES.get(record.gpu_type, {}).get("shards_per_gpu") or 0)
    spot, grace = None, 0
    if is_spot(record):
        grace = unbilled_grace_seconds(record)
        spot = spot_seconds(record.run_start, record.seconds - grace)
    return RunShape(
        gpu_type=record.gpu_type,
        seconds=record.seconds,
        gpu_count=record.gpu_count,
        shards=record.shards,
        shards_per_gpu=shards_per_gpu,
        gpu_memory_gb_seconds=record.gpu_memory_gb_seconds,
        nvme_gb=record.nvme_gb,
        spot_seconds=spot,
        unbilled_seconds=grace,
        held_gpu_seconds=None if record.gpu_seconds == record.gpu_count * record.seconds else record.gpu_seconds,
    )


class PriceBook:
    """Users' plan histories and the rate cards, read once for many charges (a metering pass):
    the same answers as plans.catalog.plan_held_at and plans.rates.rates_for_plan, without
    their queries for every record. A plan or card changed during a pass applies from the next
    pass; a new book per pass."""

    def __init__(self):
        self._plans = PlansHeld()
        self._group_plans = GroupPlansHeld()
        self._cards = CardBook()

    def plan(self, user, moment) -> PlanSnapshot:
        """The plan `user` held at `moment` (a run's start)."""
        return self._plans.at(user.pk, moment)

    def plans_of_run(self, record: UsageRecord) -> list[PlanSnapshot]:
        """The plans a run of the user's may be priced by: the plan held when the portal took
        the job (for a reservation's unused time: when an admin approved it) and the plan held at
        the run's start. A run started under the QOS of the plan it was queued under, and a
        reservation was granted to the plan that asked, so a switch while it waited never makes
        it cheaper."""
        queued = record.job.created_at if record.job_id else _reservation_approved(record)
        return plans_to_price(self._plans, record.user_id, queued, record.run_start)

    def group_plan(self, group_id: int | None, moment) -> PlanSnapshot | None:
        """The plan the group held at `moment`, or None: then the member pays."""
        return self._group_plans.at(group_id, moment) if group_id else None

    def rates(self, plan: PlanSnapshot, moment) -> tuple[Rates, RateCard]:
        """The card the plan pays in force at `moment`."""
        return self._cards.for_plan(plan, moment)


def _reservation_approved(record: UsageRecord):
    """When the reservation whose unused time `record` is was approved (None for other runs)."""
    if record.cluster != RESERVATION_CLUSTER:
        return None
    return (
        ReservationEvent.objects.filter(reservation_id=record.slurm_job_id, to_state=State.APPROVED)
        .order_by("created_at")
        .values_list("created_at", flat=True)
        .first()
    )


def _terms(plan: PlanSnapshot, run: RunShape, invoice_id: int) -> Terms:
    hours = int(plan.included_gpu_hours.get(run.gpu_type, 0))
    return Terms(
        capped=plan.included_hours_are_a_cap,
        included_nvme_gb=plan.included_nvme_gb,
        included_left=_included_left(invoice_id, run.gpu_type, hours),
    )


def _dearest(plans, run: RunShape, moment, prices: PriceBook, invoice_id: int):
    """(plan, rates, card, terms): of the plans a run may be priced by, the one under which it
    comes to the most before credits (the first on a tie), with what covers it under that plan.
    Raises NoRateCard or PricingError, before any credit is spent, when that plan's card cannot
    price the run."""
    offers = [(plan, *prices.rates(plan, moment), _terms(plan, run, invoice_id)) for plan in plans]
    return offers[dearest(run, [(rates, terms) for _plan, rates, _card, terms in offers])]


def _write_charge(record_pk: int, *, invoice, plan: PlanSnapshot, card, rates: Rates, gpu_price, **amounts) -> bool:
    """The one write of a charge: only onto a record no invoice holds yet (a second charge of the
    same record changes nothing). The prices written are the card's, kept with the record."""
    return bool(
        UsageRecord.objects.filter(pk=record_pk, invoice__isnull=True).update(
            invoice=invoice,
            charged_at=timezone.now(),
            plan=plan.code,
            rate_card=card,
            gpu_price=gpu_price,
            memory_price=rates.gpu_memory_gb_second,
            nvme_price=rates.nvme_gb_hour,
            **amounts,
        )
    )


def charge(record_id: int, *, prices: PriceBook | None = None) -> bool:
    """Charge one record to its draft (see the module). True when it was charged now; False
    when it already was. Raises ChargeError, changing nothing, when it cannot be priced.
    `prices`: a PriceBook shared by the charges of one pass."""
    prices = prices or PriceBook()
    facts = (
        UsageRecord.objects.filter(pk=record_id)
        .values("user_id", "group_id", "run_start", "run_end", "invoice_id")
        .first()
    )
    if facts is None or facts["invoice_id"] is not None:
        return False
    # A group run is the group's to pay when the group held a plan at the run's start.
    group_plan = prices.group_plan(facts["group_id"], facts["run_start"])
    paying_group = facts["group_id"] if group_plan is not None else None
    with transaction.atomic():
        # The draft first, then the record: the order month closing takes them in.
        invoice = open_draft(facts["user_id"], facts["run_end"], group_id=paying_group)
        record = UsageRecord.objects.select_for_update(of=("self",)).select_related("user", "job").get(pk=record_id)
        if record.invoice_id is not None:
            return False
        run = run_shape(record)
        plans = [group_plan] if group_plan else prices.plans_of_run(record)
        try:
            plan, rates, card, terms = _dearest(plans, run, record.run_start, prices, invoice.pk)
        except (NoRateCard, PricingError) as exc:
            raise ChargeError(str(exc)) from exc
        included_hours = int(plan.included_gpu_hours.get(record.gpu_type, 0))
        # Credits are spent for what the split would ask of them, then the split is made with
        # what the spend took (at most the balance).
        credited, credit_entry = apply_credits(
            record.user_id,
            record.gpu_type,
            credits_wanted(run, terms),
            f"usage-record:{record.pk}",
            job_uuid=record.job.uuid if record.job_id else None,
            group_id=paying_group,
        )
        try:
            result = split(run, rates, replace(terms, credits=credited))
        except PricingError as exc:
            raise ChargeError(str(exc)) from exc
        note = ""
        if run.is_spot and not terms.capped:
            note = spot_note(result, run.unbilled_seconds)
        elif terms.capped and run.to_cover > terms.included_left:
            note = f"beyond the {plan.name} plan's {included_hours} included hours: not billed (free plan)"
        elif record.gpu_seconds and record.gpu_memory_source == UsageRecord.MemorySource.NONE and not terms.capped:
            note = "no GPU telemetry for this run: GPU-seconds only"

        return _write_charge(
            record.pk,
            invoice=invoice,
            plan=plan,
            card=card,
            rates=rates,
            gpu_price=result.unit_price,
            included_gpu_seconds=result.included,
            credit_gpu_seconds=result.credited,
            credit_entry_id=credit_entry,
            billable_gpu_seconds=result.billable,
            unbilled_grace_gpu_seconds=result.unbilled_grace,
            amount_gpu=result.amount_gpu,
            amount_memory=result.amount_memory,
            amount_nvme=result.amount_nvme,
            amount=result.amount,
            note=note[:200],
        )
