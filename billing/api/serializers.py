from django.conf import settings
from rest_framework import serializers

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


class QuoteInputSerializer(serializers.Serializer):
    gpu_type = serializers.ChoiceField(choices=[], help_text="A GPU type of the pool")
    gpu_count = StrictIntegerField(
        min_value=0, max_value=MOST_GPUS, help_text="Whole GPUs; 0 for a shard job (priced by its GPU memory)"
    )
    seconds = StrictIntegerField(min_value=0, max_value=MOST_SECONDS, help_text="How long (a time limit, in seconds)")
    gpu_memory_gb = StrictIntegerField(
        min_value=0,
        max_value=MOST_GB,
        required=False,
        default=0,
        help_text="GPU memory of the job, all its GPUs together, in GB (average used; for a shard job its shards' GB)",
    )
    nvme_gb = StrictIntegerField(
        min_value=0, max_value=MOST_GB, required=False, default=0, help_text="NVMe cache held for the same time, in GB"
    )
    plan = StrictCharField(
        SLUG.regex.pattern.replace("\\Z", "$"),
        required=False,
        allow_null=True,
        help_text="A plan code (free, pro, enterprise, ...); default: the caller's plan",
    )

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        # The pool's GPU types are a setting: read them when the schema is made, not at import.
        self.fields["gpu_type"].choices = list(settings.GPU_TYPES)


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
    gpu_seconds = serializers.IntegerField(help_text="GPU-seconds of the quote (GPUs x seconds)")
    plan_gpu_seconds_left = serializers.IntegerField(
        help_text="Your plan's included GPU-seconds of this type left this month"
    )
    credit_gpu_seconds = serializers.IntegerField(help_text="GPU-seconds of this type your credits would pay for")
    covered_gpu_seconds = serializers.IntegerField(
        help_text="Of `gpu_seconds`, at most this many covered (plan hours first, then credits); the rest is billed"
    )
    payable = serializers.CharField(
        help_text="USD, to the cent: what you would pay of the quote after plan hours, credits and included NVMe, "
        "split as charging splits a run (GPU memory and NVMe by the uncovered share); 0 on a free plan"
    )


class QuoteSerializer(serializers.Serializer):
    gpu_type = serializers.CharField()
    gpu_count = serializers.IntegerField()
    seconds = serializers.IntegerField()
    plan = serializers.CharField(help_text="The plan the quote is for")
    currency = serializers.CharField()
    lines = QuoteLineSerializer(many=True)
    total = serializers.CharField(help_text="USD, exact: the sum of the exact lines")
    total_rounded = serializers.CharField(
        help_text="USD: the sum of the lines each rounded half-up to the cent (what this usage alone is invoiced)"
    )
    rates = QuoteRatesSerializer()
    coverage = QuoteCoverageSerializer(
        allow_null=True,
        help_text="For your own plan: what your included hours and credits would cover (null for another plan's quote)",
    )
