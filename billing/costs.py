"""What a job costs, for the job page and `GET /api/v1/jobs/{id}/` (the provider behind
jobs.costs, registered in billing's AppConfig.ready()).

`cost` (exact): the sum of the `amount` of the job's usage records, one per Slurm run (a
requeued job has several), given once the job has ended and every record of it has been
charged. Until then it is null: a record is written by metering when slurmdbd reports the
run, and its amount is set when it is charged to the month's draft invoice.

`cost_so_far` (an estimate), while the job is RUNNING: the runs already charged (earlier runs
of a requeued job) plus the run in progress priced as if it ended now, by the rules charging
applies to a metered run (billing/actions/charging.py), as far as they can be known before metering:
- the payer and plan as charging will decide them: the job's group when it held a plan at the
  run's start (its included hours, counted on the group's invoice), else the owner;
- seconds = now - the run's start; prices = the card the plan pays in force at the run's
  start, read by the same book as charging's (plans.rates.CardBook);
- GPU-seconds to cover: whole GPUs x seconds; for a shard job, its GPU-second equivalent
  (shards / shards per GPU x seconds, rounded down), since it holds part of one GPU;
- the plan's included hours of the job's GPU type left this month cover them first: plan
  hours x 3600 minus the included GPU-seconds of the records charged to this month's invoice,
  minus what the user's other running jobs of that type that started earlier take first (a
  group's: other members' running group jobs are not counted, an estimate's limit);
- the rest is billable: whole GPUs at the GPU price; a shard job's GPU memory (shards x GB
  per shard x seconds) of the billable share at the memory price; the NVMe cache beyond the
  plan's included NVMe (the `gres/nvme` GB it holds), of the billable share, per GB-hour;
- a free plan's usage is all included ($0): Slurm stops it at the cap;
- not in the estimate: GPU memory of whole-GPU jobs (telemetry's average, known when the run
  is metered), credits (spent at charging), the plan fee and any volume discount (invoice
  lines). So the charge may differ; the page and the API say it is an estimate.

Amounts are exact `Decimal` (pricing rule 2); a share of a line is carried to 12 places half-up
like the pricing core's one division. Queries: a fixed number for any number of jobs (one for
their records, one for the month's included hours, three per rate card code the owners' plans
pay, and per distinct owner their plan history).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import date, datetime
from decimal import Decimal

from django.conf import settings
from django.db.models import Count, Max, Q, Sum
from django.utils import timezone

from billing.charge_split import RunShape, Terms, credits_wanted, dearest, split
from billing.invoices.drafts import month_of
from billing.models import Invoice, UsageRecord
from billing.pricing import SECONDS_PER_HOUR, PricingError, Rates
from billing.spot import PREEMPTED, spot_seconds
from cluster.records.gres import parse_gres
from credits.actions import ledger
from credits.weights import Burn, NoBurnWeight, burn, weight_for
from foundation.gpu_types import gpu_types_from_mapping
from groups.group_plans import GroupPlansHeld
from jobs.costs import CostDetail, JobCost
from jobs.models import Job, JobState
from plans.catalog import PlansHeld, PlanSnapshot, plans_to_price
from plans.models import Plan
from plans.rates import CardBook, NoRateCard

ZERO = Decimal(0)
ESTIMATE_NOTE = (
    "Estimate: the time so far at your plan's prices; GPU memory, credits and discounts are settled "
    "when Slurm's accounting of the run is charged."
)


REQUEUED_NOTE = "The runs so far; the job was requeued and waits to run again."


@dataclass
class _Sums:
    """Charged usage records of one job, added up (a mutable accumulator)."""

    runs: int = 0
    uncharged: int = 0
    gpu_seconds: int = 0
    included: int = 0
    credit: int = 0
    billable: int = 0
    amount_gpu: Decimal = ZERO
    amount_memory: Decimal = ZERO
    amount_nvme: Decimal = ZERO
    amount: Decimal = ZERO
    plan: str = ""
    preempted: int = 0
    preempted_gpu_seconds: int = 0


def included_seconds_used(user_ids, period: date, group_ids=()) -> dict[tuple[tuple[str, int], str], int]:
    """{(payer, GPU type): included GPU-seconds} of the records charged to each payer's invoice
    of `period` (the month whose included hours they used); a payer is ("user", id) or
    ("group", id) for a group that holds a plan. Two queries at most."""
    used: dict[tuple[tuple[str, int], str], int] = {}
    for kind, ids in (("user", list(user_ids)), ("group", list(group_ids))):
        if not ids:
            continue
        rows = (
            UsageRecord.objects.filter(**{f"invoice__{kind}_id__in": ids}, invoice__period=period)
            .exclude(invoice__status=Invoice.Status.VOID)
            .values(f"invoice__{kind}_id", "gpu_type")
            .annotate(seconds=Sum("included_gpu_seconds"))
        )
        for row in rows:
            used[((kind, row[f"invoice__{kind}_id"]), row["gpu_type"])] = int(row["seconds"] or 0)
    return used


def payer_credits(payer: tuple[str, int], now=None) -> int:
    """The spendable credits of a payer, ("user", id) or ("group", id): the account or the pool."""
    kind, pk = payer
    if kind == "group":
        return ledger.spendable_balance(None, now, group_id=pk)
    return ledger.spendable_balance(pk, now)


def covered_by_credits(gpu_type: str, wanted: int, available: int, now, weights=None) -> Burn | None:
    """What `available` credits would cover of `wanted` GPU-seconds of `gpu_type`, as a spend
    takes them (credits.weights.burn); None when they cover nothing or do not pay for the type.
    `weights`: a {GPU type: weight} the caller keeps across calls."""
    if not wanted or available <= 0:
        return None
    try:
        weight = weights[gpu_type] if weights and gpu_type in weights else weight_for(gpu_type, now)
    except NoBurnWeight:
        return None
    if weights is not None:
        weights[gpu_type] = weight
    return burn(wanted, weight, available)


def _record_sums(jobs: Sequence[Job]) -> dict[int, dict[datetime, _Sums]]:
    """{job id: {run start: sums}}: one query, grouped by run."""
    rows = (
        UsageRecord.objects.filter(job_id__in=[job.pk for job in jobs])
        .values("job_id", "run_start")
        # Before the sums below: their "gpu_seconds" alias would hide the field from these.
        .annotate(
            preempted=Count("id", filter=Q(state=PREEMPTED)),
            preempted_gpu_seconds=Sum("gpu_seconds", filter=Q(state=PREEMPTED)),
        )
        .annotate(
            runs=Count("id"),
            charged=Count("charged_at"),
            gpu_seconds=Sum("gpu_seconds"),
            included=Sum("included_gpu_seconds"),
            credit=Sum("credit_gpu_seconds"),
            billable=Sum("billable_gpu_seconds"),
            amount_gpu=Sum("amount_gpu"),
            amount_memory=Sum("amount_memory"),
            amount_nvme=Sum("amount_nvme"),
            amount=Sum("amount"),
            plan=Max("plan"),
        )
        .order_by()
    )
    found: dict[int, dict[datetime, _Sums]] = defaultdict(dict)
    for row in rows:
        found[row["job_id"]][row["run_start"]] = _Sums(
            runs=row["runs"],
            uncharged=row["runs"] - row["charged"],
            gpu_seconds=int(row["gpu_seconds"] or 0),
            included=int(row["included"] or 0),
            credit=int(row["credit"] or 0),
            billable=int(row["billable"] or 0),
            amount_gpu=row["amount_gpu"] or ZERO,
            amount_memory=row["amount_memory"] or ZERO,
            amount_nvme=row["amount_nvme"] or ZERO,
            amount=row["amount"] or ZERO,
            plan=row["plan"] or "",
            preempted=row["preempted"],
            preempted_gpu_seconds=int(row["preempted_gpu_seconds"] or 0),
        )
    return found


def _add(total: _Sums, more: _Sums) -> _Sums:
    return _Sums(
        runs=total.runs + more.runs,
        uncharged=total.uncharged + more.uncharged,
        gpu_seconds=total.gpu_seconds + more.gpu_seconds,
        included=total.included + more.included,
        credit=total.credit + more.credit,
        billable=total.billable + more.billable,
        amount_gpu=total.amount_gpu + more.amount_gpu,
        amount_memory=total.amount_memory + more.amount_memory,
        amount_nvme=total.amount_nvme + more.amount_nvme,
        amount=total.amount + more.amount,
        plan=more.plan or total.plan,
        preempted=total.preempted + more.preempted,
        preempted_gpu_seconds=total.preempted_gpu_seconds + more.preempted_gpu_seconds,
    )


def _detail(sums: _Sums, basis: str, note: str = "") -> CostDetail:
    return CostDetail(
        basis=basis,
        runs=sums.runs,
        plan=sums.plan,
        gpu_seconds=sums.gpu_seconds,
        included_gpu_seconds=sums.included,
        credit_gpu_seconds=sums.credit,
        billable_gpu_seconds=sums.billable,
        amount_gpu=sums.amount_gpu,
        amount_memory=sums.amount_memory,
        amount_nvme=sums.amount_nvme,
        note=note,
        preempted_runs=sums.preempted,
        preempted_gpu_seconds=sums.preempted_gpu_seconds,
    )


def held_by(job: Job) -> tuple[str, int, int, int]:
    """(GPU type, whole GPUs, shards, NVMe GB) the job holds, from its TRES."""
    items = parse_gres(",".join(part.strip().removeprefix("gres/") for part in (job.tres_per_node or "").split(",")))
    gpu_type, shards, nvme = job.gpu_type, 0, 0
    for item in items:
        if item.name == "shard":
            shards, gpu_type = item.count, gpu_type or item.gres_type
        elif item.name == "gpu" and item.gres_type:
            gpu_type = gpu_type or item.gres_type
        elif item.name == "nvme":
            nvme = item.count
    whole = 0 if shards else job.gpu_count or 0
    return gpu_type, whole, shards, nvme


def _priced(job: Job) -> bool:
    gpu_type, whole, shards, _nvme = held_by(job)
    return bool(gpu_type and (whole or shards))


class _Estimator:
    """Prices runs in progress; caches each owner's plan and the rate cards, and shares out
    each user's included hours left between their running jobs, earliest start first."""

    def __init__(self, owners: set[int], now: datetime, groups: set[int] = frozenset()):
        self.now = now
        self.period = month_of(now)
        self.plans_held = PlansHeld()
        self.group_plans = GroupPlansHeld()
        self.included_used = included_seconds_used(owners, self.period, groups) if owners or groups else {}
        self.gpu_types = gpu_types_from_mapping(settings.GPU_TYPES)
        # Each run is priced at its plan's card in force at its start, as charging will.
        self.cards = CardBook()
        self.credits_left: dict[tuple[str, int], int] = {}
        self.weights: dict[str, Decimal] = {}

    def _payer(self, job: Job) -> tuple[tuple[str, int], list[PlanSnapshot]]:
        """Who pays for the run and the plans it may be priced by, as charging will decide: the
        job's group when it held a plan at the run's start, else the owner, by the plans held
        when the portal took the job and at the run's start (billing/actions/charging.py)."""
        if job.group_id:
            group_plan = self.group_plans.at(job.group_id, job.start_time)
            if group_plan is not None:
                return ("group", job.group_id), [group_plan]
        return ("user", job.owner_id), plans_to_price(self.plans_held, job.owner_id, job.created_at, job.start_time)

    def _rates(self, plan: PlanSnapshot, start: datetime) -> Rates | None:
        try:
            return self.cards.for_plan(plan, start)[0]
        except NoRateCard:
            return None

    def _credit_gpu_seconds(self, payer, gpu_type: str, wanted: int) -> int:
        """GPU-seconds of `gpu_type` the payer's credits would cover of `wanted`, read once a
        payer and taken off what is left for later runs."""
        if not wanted:
            return 0
        if payer not in self.credits_left:
            self.credits_left[payer] = payer_credits(payer, self.now)
        taken = covered_by_credits(gpu_type, wanted, self.credits_left[payer], self.now, self.weights)
        if taken is None:
            return 0
        self.credits_left[payer] -= taken.credits
        return taken.covered_gpu_seconds

    def estimate(self, job: Job) -> _Sums | None:
        """The run in progress priced by the charge split as if it ended now, under the plan
        charging would choose (the dearer of the plan at submission and at the start)."""
        payer, plans = self._payer(job)
        gpu_type, whole, shards, nvme = held_by(job)
        info = self.gpu_types.get(gpu_type)
        if info is None or not (whole or shards):
            return None
        seconds = max(0, int((self.now - job.start_time).total_seconds()))
        spot = settings.SPOT_QOS and job.qos == settings.SPOT_QOS
        run = RunShape(
            gpu_type=gpu_type,
            seconds=seconds,
            gpu_count=whole,
            shards=shards,
            shards_per_gpu=info.shards_per_gpu,
            gpu_memory_gb_seconds=shards * info.shard_gb * seconds,
            nvme_gb=nvme,
            spot_seconds=spot_seconds(job.start_time, seconds) if spot else None,
        )
        key = (payer, gpu_type)
        offers = []
        for plan in plans:
            rates = self._rates(plan, job.start_time)
            if rates is None:
                return None
            hours_left = plan.included_gpu_hours.get(gpu_type, 0) * SECONDS_PER_HOUR - self.included_used.get(key, 0)
            terms = Terms(plan.included_hours_are_a_cap, plan.included_nvme_gb, max(0, hours_left))
            offers.append((plan, rates, terms))
        try:
            plan, rates, terms = offers[dearest(run, [(rates, terms) for _plan, rates, terms in offers])]
        except PricingError:
            return None
        terms = replace(terms, credits=self._credit_gpu_seconds(payer, gpu_type, credits_wanted(run, terms)))
        result = split(run, rates, terms)
        self.included_used[key] = self.included_used.get(key, 0) + result.included
        return _Sums(
            gpu_seconds=run.gpu_seconds,
            included=result.included,
            credit=result.credited,
            billable=result.billable,
            amount_gpu=result.amount_gpu,
            amount_memory=result.amount_memory,
            amount_nvme=result.amount_nvme,
            amount=result.amount,
            plan=plan.code,
        )


def job_costs(jobs: Sequence[Job], now: datetime | None = None) -> Mapping[int, JobCost]:
    """The provider: a JobCost for each job with something to say (see the module's rules)."""
    now = now or timezone.now()
    by_run = _record_sums(jobs)
    # Running jobs that hold something to price (no query: from their TRES).
    asked = {
        job.pk for job in jobs if job.state == JobState.RUNNING and job.start_time and job.owner_id and _priced(job)
    }
    owners = {job.owner_id for job in jobs if job.pk in asked}
    # Their owners' other running jobs too (one query): those that started earlier take the
    # included hours left first, whether or not they are on this page.
    others = (
        Job.objects.filter(owner_id__in=owners, state=JobState.RUNNING, start_time__isnull=False).exclude(pk__in=asked)
        if owners
        else []
    )
    running = sorted([job for job in jobs if job.pk in asked] + list(others), key=lambda job: (job.start_time, job.pk))
    groups = {job.group_id for job in running if job.group_id}
    estimator = _Estimator(owners, now, groups) if running else None
    result: dict[int, JobCost] = {}
    for job in running:
        if job.pk not in asked:
            estimator.estimate(job)  # takes its share of the hours; not asked about
            continue
        # Runs charged before this one (a requeued job); the run in progress is not metered yet.
        earlier = _Sums()
        for run_start, sums in by_run.get(job.pk, {}).items():
            if run_start < job.start_time:
                earlier = _add(earlier, sums)
        current = estimator.estimate(job)
        if current is None:
            continue
        total = _add(earlier, current)
        result[job.pk] = JobCost(
            cost=None,
            cost_so_far=total.amount,
            detail=_detail(total, "estimate", ESTIMATE_NOTE),
            is_estimate=True,
        )
    for job in jobs:
        runs = by_run.get(job.pk)
        if job.pk in result or not runs:
            continue
        total = _Sums()
        for sums in runs.values():
            total = _add(total, sums)
        if total.uncharged:
            result[job.pk] = JobCost(cost=None, cost_so_far=None, notes=("Metered; not charged yet.",))
        elif job.is_final:
            result[job.pk] = JobCost(cost=total.amount, cost_so_far=None, detail=_detail(total, "metered"))
        else:
            # Requeued (a preempted spot job, an admin's requeue): its earlier runs, waiting to run again.
            result[job.pk] = JobCost(
                cost=None, cost_so_far=total.amount, detail=_detail(total, "metered", REQUEUED_NOTE)
            )
    return _with_plan_names(result)


def _with_plan_names(result: dict[int, JobCost]) -> dict[int, JobCost]:
    """Each detail's plan by its name, one query for the page's plans."""
    codes = {cost.detail.plan for cost in result.values() if cost.detail and cost.detail.plan}
    if not codes:
        return result
    names = dict(Plan.objects.filter(code__in=codes).values_list("code", "name"))
    return {
        pk: replace(cost, detail=replace(cost.detail, plan_name=names.get(cost.detail.plan, cost.detail.plan)))
        if cost.detail
        else cost
        for pk, cost in result.items()
    }
