"""Usage records: what one Slurm job run used, metered once from slurmdbd, and what it came to.

Identity: a run is (cluster, Slurm job id, run start); a requeued job has one record per run.
The unique constraint is what makes metering exactly-once: metering the same window again
finds the row and writes nothing. (A run that Slurm gave GPUs of two types is split into one
record per type, hence `gpu_type` in the key; through the portal a job has one type.)

Quantities are integers (GPU-seconds, GB-seconds), except GPU-memory GB-seconds from telemetry,
which come from an average and carry three places. Money on a record is exact (`Decimal`, 12
places, billing/pricing.py's rule 2); rounding to the cent happens only on invoice lines.

How a record is paid for (set once, when it is charged to its invoice, under that invoice's
row lock, so the plan's included hours are shared out in the order runs were charged):
1. `included_gpu_seconds`: covered by the plan's included hours of this GPU type this month;
2. `credit_gpu_seconds`: covered by credits (the credits ledger; `credit_entry_id` names the
   spend entry) — the seam for the credits issue;
3. the rest is billable: `billable_gpu_seconds` at `gpu_price`, and the GPU memory and NVMe of
   the billable share at their prices, summed in `amount`.
A free plan bills nothing: its usage beyond the included hours is refused by Slurm, and what a
late record shows beyond them is recorded as included (`amount` 0) with `note` saying so.
"""

from __future__ import annotations

from decimal import Decimal

from django.conf import settings
from django.db import models
from django.db.models import Q

# Exact money on records: 12 places (pricing rule 2), up to $10^8.
EXACT_MONEY = {"max_digits": 20, "decimal_places": 12, "default": Decimal(0)}
UNIT_PRICE = {"max_digits": 14, "decimal_places": 8, "default": Decimal(0)}
# The `cluster` of a reservation's unused-time record (billing/actions/reserved_time.py), whose
# `slurm_job_id` is the reservation's id.
RESERVATION_CLUSTER = "reservation"


class UsageRecord(models.Model):
    class MemorySource(models.TextChoices):
        TELEMETRY = "telemetry", "average used GPU memory from telemetry"
        SHARDS = "shards", "shards x GB per shard"
        NONE = "none", "no telemetry samples: GPU-seconds only"
        RESERVED = "reserved", "reserved time its jobs did not use: no GPU memory"

    # --- identity (exactly once) ---
    cluster = models.CharField(max_length=64)
    slurm_job_id = models.PositiveBigIntegerField()
    run_start = models.DateTimeField()
    gpu_type = models.CharField(max_length=32, blank=True, help_text='"" when the run had no GPU or shard')

    # --- what Slurm recorded ---
    run_end = models.DateTimeField()
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="usage_records")
    # The group the run was charged to: its Slurm account is the group's (a portal job with a
    # group, or a member's own `sbatch --account`). Whether the group or the user pays is
    # decided when the record is charged (billing/actions/charging.py).
    group = models.ForeignKey(
        "groups.Group", null=True, blank=True, on_delete=models.PROTECT, related_name="usage_records"
    )
    # The portal's job, when the run was submitted through it (matched by Slurm job id).
    job = models.ForeignKey("jobs.Job", null=True, blank=True, on_delete=models.SET_NULL, related_name="usage_records")
    state = models.CharField(max_length=32)
    # The run's QOS as slurmdbd recorded it; the spot QOS is priced by time window.
    qos = models.CharField(max_length=64, blank=True)
    seconds = models.PositiveIntegerField(help_text="Elapsed seconds of the run (slurmdbd's ElapsedRaw)")
    gpu_count = models.PositiveSmallIntegerField(default=0)
    gpu_seconds = models.PositiveBigIntegerField(default=0)
    shards = models.PositiveIntegerField(default=0)
    gpu_memory_gb_seconds = models.DecimalField(max_digits=20, decimal_places=3, default=Decimal(0))
    gpu_memory_source = models.CharField(max_length=16, choices=MemorySource.choices, default=MemorySource.NONE)
    nvme_gb = models.PositiveIntegerField(default=0)
    nvme_gb_seconds = models.PositiveBigIntegerField(default=0)
    metered_at = models.DateTimeField(auto_now_add=True)

    # --- what it came to (set once, when charged to `invoice`) ---
    invoice = models.ForeignKey(
        "billing.Invoice", null=True, blank=True, on_delete=models.PROTECT, related_name="usage_records"
    )
    charged_at = models.DateTimeField(null=True, blank=True)
    plan = models.CharField(max_length=32, blank=True, help_text="The plan's code when the run was charged")
    rate_card = models.ForeignKey(
        "plans.RateCard", null=True, blank=True, on_delete=models.PROTECT, related_name="usage_records"
    )
    gpu_price = models.DecimalField(**UNIT_PRICE, help_text="USD per GPU-second (per shard GB-second: memory)")
    memory_price = models.DecimalField(**UNIT_PRICE, help_text="USD per GB-second of GPU memory")
    nvme_price = models.DecimalField(**UNIT_PRICE, help_text="USD per GB-hour of NVMe cache")
    included_gpu_seconds = models.PositiveBigIntegerField(default=0)
    credit_gpu_seconds = models.PositiveBigIntegerField(default=0)
    # The credits ledger's spend entry (credits issue); an id, not a foreign key, so billing
    # needs no migration when the ledger lands.
    credit_entry_id = models.PositiveBigIntegerField(null=True, blank=True)
    billable_gpu_seconds = models.PositiveBigIntegerField(default=0)
    # A preempted spot run's notice (SPOT_GRACE_SECONDS at most, per GPU): not billed.
    unbilled_grace_gpu_seconds = models.PositiveBigIntegerField(default=0)
    amount_gpu = models.DecimalField(**EXACT_MONEY)
    amount_memory = models.DecimalField(**EXACT_MONEY)
    amount_nvme = models.DecimalField(**EXACT_MONEY)
    amount = models.DecimalField(**EXACT_MONEY, help_text="Exact: the sum of the three amounts")
    note = models.CharField(max_length=200, blank=True)

    class Meta:
        ordering = ["run_end", "id"]
        constraints = [
            models.UniqueConstraint(
                fields=["cluster", "slurm_job_id", "run_start", "gpu_type"], name="one_record_per_run"
            ),
            models.CheckConstraint(condition=Q(run_end__gte=models.F("run_start")), name="run_ends_after_start"),
            models.CheckConstraint(
                condition=Q(invoice__isnull=True) | Q(charged_at__isnull=False), name="charged_when_on_invoice"
            ),
        ]
        indexes = [
            models.Index(fields=["user", "run_end"]),
            models.Index(fields=["group", "run_end"]),
            models.Index(fields=["invoice", "gpu_type"]),
            models.Index(fields=["job"]),
        ]

    def __str__(self):
        return f"{self.cluster}/{self.slurm_job_id} from {self.run_start:%Y-%m-%d %H:%M:%S}"
