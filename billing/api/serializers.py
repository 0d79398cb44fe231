from django.conf import settings
from rest_framework import serializers

from cluster.clusters.registry import all_clusters
from foundation.api.errors import StrictBooleanField
from plans.rate_cards import SLUG

# Bounds that keep a quote's arithmetic small; far beyond any job the pool can run.
MOST_GPUS = 1024
MOST_SECONDS = 366 * 24 * 3600
MOST_GB = 1_000_000


class StrictIntegerField(serializers.IntegerField):
    """A JSON number that is whole, as the schema says: DRF's IntegerField would also take
    "60", 60.0 and (through str) other things a client did not mean as a count."""

    def to_internal_value(self, data):
        if isinstance(data, bool) or not isinstance(data, int):
            self.fail("invalid")
        return super().to_internal_value(data)


class StrictCharField(serializers.RegexField):
    def to_internal_value(self, data):
        if not isinstance(data, str):
            self.fail("invalid")
        return super().to_internal_value(data)


# Fields of a job's submission (POST /api/v1/jobs/) that do not change its price: a quote takes
# the whole spec a client would submit, and checks only their JSON type.
PRICE_FREE_JOB_FIELDS = {
    "name": str,
    "image": str,
    "command": str,
    "data_mount": str,
    "environment": dict,
    "reservation": int,
}


class QuoteInputSerializer(serializers.Serializer):
    """A job as POST /api/v1/jobs/ takes it (the fields that change no price are accepted and
    ignored), or the quote's own shape: `seconds` and `gpu_memory_gb` for whole GPUs' memory."""

    gpu_type = serializers.ChoiceField(choices=[], help_text="A GPU type of the pool")
    gpu_count = StrictIntegerField(
        min_value=0,
        max_value=MOST_GPUS,
        required=False,
        allow_null=True,
        help_text="Whole GPUs; 0 or null for a GPU-memory (shard) job, priced by its memory",
    )
    seconds = StrictIntegerField(
        min_value=0, max_value=MOST_SECONDS, required=False, help_text="How long, in seconds; or time_limit_minutes"
    )
    time_limit_minutes = StrictIntegerField(
        min_value=1, max_value=MOST_SECONDS // 60, required=False, help_text="As a job's time limit; or seconds"
    )
    gpu_memory_gb = StrictIntegerField(
        min_value=0,
        max_value=MOST_GB,
        required=False,
        allow_null=True,
        default=0,
        help_text="Whole GPUs: their GPU memory all together, in GB (the average used). A GPU-memory job: the GB "
        "it asks, rounded up to whole shards as Slurm holds them",
    )
    nvme_gb = StrictIntegerField(
        min_value=0,
        max_value=MOST_GB,
        required=False,
        allow_null=True,
        default=0,
        help_text="NVMe cache held for the same time, in GB",
    )
    spot = StrictBooleanField(
        required=False, allow_null=True, default=False, help_text="A spot job: each window's share of the price"
    )
    group = StrictIntegerField(
        min_value=1,
        required=False,
        allow_null=True,
        help_text="The group it is charged to (one of yours): quoted under the group's plan when it holds one; "
        "absent: your default group, if you set one; null: yourself",
    )
    cluster = StrictCharField(
        r"^[A-Za-z0-9_.-]{1,32}$",
        required=False,
        allow_null=True,
        help_text="As a job's: a cluster's name (GET /api/v1/clusters/) or any; every cluster prices alike",
    )
    datasets = serializers.ListField(
        child=StrictIntegerField(min_value=1, max_value=2**53 - 1),
        required=False,
        allow_null=True,
        max_length=64,
        help_text="Dataset version ids: their GB count as the job's NVMe, as a submission counts them",
    )
    runs = StrictIntegerField(
        min_value=1, max_value=100_000, required=False, default=1, help_text="That many runs (a sweep's tasks)"
    )
    plan = StrictCharField(
        SLUG.regex.pattern.replace("\\Z", "$"),
        required=False,
        allow_null=True,
        help_text="A plan code (free, pro, enterprise, ...); default: the plan that would pay",
    )

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        # The pool's GPU types are a setting: read them when the schema is made, not at import.
        self.fields["gpu_type"].choices = list(settings.GPU_TYPES)

    def validate(self, attrs):
        unknown = sorted(set(self.initial_data) - set(self.fields) - set(PRICE_FREE_JOB_FIELDS))
        errors = {name: ["Not a field of a job or a quote."] for name in unknown}
        for name, kind in PRICE_FREE_JOB_FIELDS.items():
            value = self.initial_data.get(name)
            if value is not None and (not isinstance(value, kind) or isinstance(value, bool)):
                errors[name] = [f"Must be a JSON {'object' if kind is dict else kind.__name__} or null."]
        if ("seconds" in attrs) == ("time_limit_minutes" in attrs):
            errors["seconds"] = ["Give seconds or time_limit_minutes (one of them)."]
        if not attrs.get("gpu_count") and not attrs.get("gpu_memory_gb"):
            errors["gpu_count"] = ["Give gpu_count, or gpu_memory_gb for a GPU-memory job."]
        if attrs.get("spot") and attrs.get("group"):
            errors["spot"] = ["A spot job is not charged to a group."]
        cluster = attrs.get("cluster")
        if cluster not in (None, "any") and cluster not in {known.name for known in all_clusters()}:
            errors["cluster"] = [f"No cluster is named {cluster!r}; /api/v1/clusters/ lists them."]
        if errors:
            raise serializers.ValidationError(errors)
        attrs["seconds"] = attrs.get("seconds", (attrs.get("time_limit_minutes") or 0) * 60)
        attrs["gpu_count"] = attrs.get("gpu_count") or 0
        attrs["gpu_memory_gb"] = attrs.get("gpu_memory_gb") or 0
        attrs["nvme_gb"] = attrs.get("nvme_gb") or 0
        return attrs


class QuoteLineSerializer(serializers.Serializer):
    kind = serializers.ChoiceField(choices=["gpu", "gpu_memory", "nvme"])
    description = serializers.CharField()
    quantity = serializers.CharField(help_text="Decimal string, exact (GB-hours to 12 places when not whole)")
    unit = serializers.ChoiceField(choices=["GPU-s", "GB-s", "GB-h"])
    unit_price = serializers.CharField(help_text="USD per unit, decimal string")
    amount = serializers.CharField(help_text="USD, exact (not rounded), decimal string")
    amount_rounded = serializers.CharField(help_text="USD, half-up to the cent (as an invoice rounds it)")


class QuoteRatesSerializer(serializers.Serializer):
    card = serializers.CharField(help_text="The rate card's code")
    name = serializers.CharField()
    effective_from = serializers.DateTimeField(help_text="When the card in force came into force")
    gpu_price_per_second = serializers.CharField(help_text="USD per GPU-second for this GPU type")
    gpu_price_from = serializers.CharField(help_text='"rate card <code>": the card the plan pays')
    gpu_memory_price_per_gb_second = serializers.CharField()
    nvme_price_per_gb_hour = serializers.CharField()


class QuoteCoverageSerializer(serializers.Serializer):
    gpu_seconds = serializers.IntegerField(
        help_text="GPU-seconds plan hours and credits may cover (GPUs x seconds; a GPU-memory job's GPU-second "
        "equivalent: shards / shards per GPU x seconds)"
    )
    plan_gpu_seconds_left = serializers.IntegerField(
        help_text="The paying plan's included GPU-seconds of this type left this month"
    )
    credit_gpu_seconds = serializers.IntegerField(
        help_text="GPU-seconds of this type the payer's credits would pay for (of what the hours leave)"
    )
    covered_gpu_seconds = serializers.IntegerField(
        help_text="Of `gpu_seconds`, this many covered (plan hours first, then credits); the rest is billed"
    )
    included_gpu_seconds = serializers.IntegerField(help_text="Covered by the plan's included hours")
    credited_gpu_seconds = serializers.IntegerField(help_text="Covered by credits")
    payable = serializers.CharField(
        help_text="USD, to the cent: what the payer would pay, split as charging splits a run (0 on a free plan)"
    )
    payable_exact = serializers.CharField(help_text="USD, exact: `payable` before rounding to the cent")


class QuoteSerializer(serializers.Serializer):
    gpu_type = serializers.CharField()
    gpu_count = serializers.IntegerField()
    shards = serializers.IntegerField(help_text="A GPU-memory job's shards (0 for whole GPUs)")
    seconds = serializers.IntegerField(help_text="All runs' seconds together")
    runs = serializers.IntegerField()
    spot = serializers.BooleanField()
    plan = serializers.CharField(help_text="The plan the quote is priced under")
    payer = serializers.CharField(help_text='"you", or "group <id>" when the group the job is charged to pays')
    currency = serializers.CharField()
    lines = QuoteLineSerializer(many=True)
    total = serializers.CharField(help_text="USD, exact: the sum of the exact lines (the price, nothing covered)")
    total_rounded = serializers.CharField(
        help_text="USD: the sum of the lines each rounded half-up to the cent (what this usage alone is invoiced)"
    )
    rates = QuoteRatesSerializer()
    coverage = QuoteCoverageSerializer(
        allow_null=True,
        help_text="What the payer's plan hours and credits would cover now, and what is left to pay (null for "
        "another plan's quote)",
    )
