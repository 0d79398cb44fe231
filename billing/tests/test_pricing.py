"""The pure pricing core: the article's example to the last digit, the one rounding rule,
volume discounts at their edges, pro rata by day, and properties over many inputs."""

from datetime import UTC, datetime
from decimal import ROUND_HALF_UP, Decimal
from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from billing import pricing
from billing.pricing import DiscountTier, PricingError, Rates, pro_rata, quote, to_cents, volume_discount

# The article's list prices, written out here rather than read from the seed, so the seed
# is checked against the article too (test_rate_cards).
LIST = Rates(
    card="list",
    name="List prices",
    effective_from=datetime(2020, 1, 1, tzinfo=UTC),
    gpu_second={"a100": Decimal("0.0015"), "h100": Decimal("0.0024"), "rtx4090": Decimal("0.00048")},
    gpu_memory_gb_second=Decimal("0.00002"),
    nvme_gb_hour=Decimal("0.02"),
)


def test_the_articles_worked_example_to_the_last_digit():
    result = quote("a100", 1, 1800, gpu_memory_gb=24, nvme_gb=500, rates=LIST)
    gpu, memory, nvme = result.lines
    assert (gpu.quantity, gpu.amount) == (Decimal(1800), Decimal("2.70"))
    assert (memory.quantity, memory.amount) == (Decimal(43200), Decimal("0.864"))
    assert (nvme.quantity, nvme.amount) == (Decimal(250), Decimal("5.00"))
    assert result.total == Decimal("8.564")
    assert pricing.format_amount(result.total) == "8.564"
    assert [pricing.format_amount(line.amount) for line in result.lines] == ["2.70", "0.864", "5.00"]
    assert [pricing.format_quantity(line.quantity) for line in result.lines] == ["1800", "43200", "250"]
    # At invoice time each line is rounded half-up to the cent: 0.864 -> 0.86.
    assert result.total_rounded == Decimal("8.56")


def test_gpu_seconds_count_every_gpu_and_memory_is_the_jobs_total():
    result = quote("h100", 2, 100, gpu_memory_gb=10, rates=LIST)
    assert result.lines[0].quantity == 200
    assert result.lines[0].amount == Decimal("0.48")
    # GPU memory is the job's, all its GPUs together: not multiplied by the GPU count.
    assert result.lines[1].quantity == 1000


def test_a_shard_job_is_priced_by_its_memory_alone():
    result = quote("a100", 0, 3600, gpu_memory_gb=12, rates=LIST)
    assert result.lines[0].amount == 0
    assert result.total == Decimal("0.864")


@pytest.mark.parametrize(
    ("amount", "cents"),
    [
        ("0.005", "0.01"),
        ("0.004999", "0.00"),
        ("0.015", "0.02"),  # half-up, not to even (banker's rounding would give 0.02 here too)
        ("0.025", "0.03"),  # ... but 0.02 here: half-up is the rule
        ("2.345", "2.35"),
        ("2.3449999999", "2.34"),
        ("8.564", "8.56"),
        ("0", "0.00"),
    ],
)
def test_invoice_rounding_is_half_up_to_the_cent(amount, cents):
    assert to_cents(Decimal(amount)) == Decimal(cents)
    assert str(to_cents(Decimal(amount))) == cents


def test_lines_are_rounded_one_by_one_at_invoice_time():
    # Two lines of half a cent each: 0.01 + 0.01 on the invoice, though together they are 0.01.
    rates = Rates("t", "t", None, {"a100": Decimal("0.005")}, Decimal("0.005"), Decimal(0))
    result = quote("a100", 1, 1, gpu_memory_gb=1, rates=rates)
    assert result.total == Decimal("0.010")
    assert result.total_rounded == Decimal("0.02")


def test_nvme_hours_that_do_not_divide_are_carried_to_twelve_places():
    result = quote("a100", 0, 1, nvme_gb=1, rates=LIST)
    nvme = result.lines[2]
    # 1 GB-second is 1/3600 GB-hour; $0.02 / 3600 = 0.0000055555...
    assert nvme.quantity == Decimal("0.000277777778")
    assert nvme.amount == Decimal("0.000005555556")


@pytest.mark.parametrize("bad", [1.5, 2.0, True, "3", None])
def test_floats_and_other_non_numbers_are_refused(bad):
    with pytest.raises(TypeError):
        quote("a100", 1, bad, rates=LIST)


def test_a_float_price_is_refused():
    with pytest.raises(TypeError):
        Rates("t", "t", None, {"a100": 0.0015}, Decimal(0), Decimal(0))


@pytest.mark.parametrize(("name", "kwargs"), [("seconds", {"seconds": -1}), ("nvme_gb", {"nvme_gb": -5})])
def test_negative_quantities_are_refused_by_name(name, kwargs):
    arguments = {"gpu_type": "a100", "gpu_count": 1, "seconds": 10, **kwargs}
    with pytest.raises(PricingError) as caught:
        quote(**arguments, rates=LIST)
    assert caught.value.field == name


def test_a_gpu_type_the_card_does_not_price_is_refused():
    with pytest.raises(PricingError) as caught:
        quote("b200", 1, 10, rates=LIST)
    assert caught.value.field == "gpu_type"


def test_a_card_prices_only_the_types_it_lists_and_says_which_card():
    rates = Rates("enterprise", "Enterprise", None, {"a100": Decimal("0.0025")}, Decimal(0), Decimal(0))
    assert quote("a100", 1, 1800, rates=rates).total == Decimal("4.50")
    assert rates.gpu_price_source("a100") == "rate card enterprise"
    with pytest.raises(PricingError, match="'enterprise' has no price for 'h100'"):
        quote("h100", 1, 1000, rates=rates)


# docs/product.md's Enterprise tiers, as the seeded enterprise card holds them (in either order).
TIERS = (DiscountTier(Decimal("5000"), Decimal("0.05")), DiscountTier(Decimal("10000"), Decimal("0.10")))


@pytest.mark.parametrize(
    ("spend", "rate", "amount"),
    [
        ("0", "0", "0"),
        ("4999.99", "0", "0"),
        ("5000", "0.05", "250.00"),
        ("5000.00", "0.05", "250.00"),
        ("9999.99", "0.05", "499.9995"),
        ("10000", "0.10", "1000.00"),
        ("10000.01", "0.10", "1000.001"),
    ],
)
def test_volume_discount_at_its_thresholds(spend, rate, amount):
    discount = volume_discount(Decimal(spend), TIERS)
    assert discount.rate == Decimal(rate)
    assert discount.amount == Decimal(amount)


def test_volume_discount_rounds_like_any_line_at_invoice_time():
    assert to_cents(volume_discount(Decimal("9999.99"), TIERS).amount) == Decimal("500.00")


def test_no_tiers_no_discount_and_tiers_are_checked():
    assert volume_discount(Decimal("1000000"), ()).rate == 0
    assert volume_discount(Decimal("6000"), TIERS[::-1]).rate == Decimal("0.05")
    with pytest.raises(PricingError):
        DiscountTier(Decimal("1"), Decimal("1"))
    with pytest.raises(TypeError):
        DiscountTier(Decimal("1"), 0.05)


@pytest.mark.parametrize(
    ("year", "month", "days"),
    [(2026, 2, 28), (2028, 2, 29), (2026, 4, 30), (2026, 1, 31), (2100, 2, 28), (2000, 2, 29)],
)
def test_pro_rata_by_day_in_months_of_every_length(year, month, days):
    fee = Decimal("299.00")
    assert pricing.days_in_month(year, month) == days
    assert pro_rata(fee, days, days) == fee
    assert pro_rata(fee, 0, days) == 0
    # Every day costs the same: N days are N one-day fees, to the cent.
    one_day = Fraction(fee) / days
    for used in range(days + 1):
        exact = one_day * used
        assert to_cents(pro_rata(fee, used, days)) == _half_up_cents(exact)


def test_pro_rata_examples():
    assert pro_rata(Decimal("299.00"), 14, 28) == Decimal("149.50")
    assert pro_rata(Decimal("299.00"), 15, 30) == Decimal("149.50")
    assert to_cents(pro_rata(Decimal("299.00"), 1, 31)) == Decimal("9.65")  # 9.6451...
    assert to_cents(pro_rata(Decimal("299.00"), 10, 31)) == Decimal("96.45")  # 96.4516...


@pytest.mark.parametrize(("days", "month_days", "field"), [(32, 31, "days"), (30, 29, "days"), (1, 27, "month_days")])
def test_pro_rata_refuses_days_outside_the_month(days, month_days, field):
    with pytest.raises(PricingError) as caught:
        pro_rata(Decimal("299.00"), days, month_days)
    assert caught.value.field == field


def _half_up_cents(value: Fraction) -> Decimal:
    """The exact rational rounded half-up to the cent, without Decimal's help."""
    cents = value * 100
    whole = int(cents)  # values are >= 0 here
    if cents - whole >= Fraction(1, 2):
        whole += 1
    return (Decimal(whole) / 100).quantize(Decimal("0.01"), rounding=ROUND_HALF_UP)


PRICES = st.decimals(min_value=0, max_value=10, places=8, allow_nan=False, allow_infinity=False)
RATES = st.builds(lambda gpu, memory, nvme: Rates("p", "p", None, {"a100": gpu}, memory, nvme), PRICES, PRICES, PRICES)


@given(
    gpu_count=st.integers(0, 64),
    seconds=st.integers(0, 400 * 86400),
    memory=st.integers(0, 10_000),
    nvme=st.integers(0, 100_000),
    rates=RATES,
)
def test_a_quotes_total_is_the_sum_of_its_lines(gpu_count, seconds, memory, nvme, rates):
    result = quote("a100", gpu_count, seconds, gpu_memory_gb=memory, nvme_gb=nvme, rates=rates)
    assert result.total == sum(line.amount for line in result.lines)
    assert result.total_rounded == sum(to_cents(line.amount) for line in result.lines)


@given(gpu_count=st.integers(0, 64), seconds=st.integers(0, 200 * 86400), rates=RATES)
def test_doubling_the_seconds_doubles_the_gpu_line(gpu_count, seconds, rates):
    single = quote("a100", gpu_count, seconds, rates=rates).lines[0]
    double = quote("a100", gpu_count, 2 * seconds, rates=rates).lines[0]
    assert double.quantity == 2 * single.quantity
    assert double.amount == 2 * single.amount


@given(gb=st.integers(0, 100_000), seconds=st.integers(0, 400 * 86400), price=PRICES)
def test_the_nvme_division_never_moves_a_cent(gb, seconds, price):
    """Rule 2 of the module: the 12-place quotient rounds to the same cent as the exact one."""
    rates = Rates("p", "p", None, {"a100": Decimal(0)}, Decimal(0), price)
    line = quote("a100", 0, seconds, nvme_gb=gb, rates=rates).lines[2]
    exact = Fraction(gb * seconds) * Fraction(price) / 3600
    assert to_cents(line.amount) == _half_up_cents(exact)
    assert abs(Fraction(line.amount) - exact) <= Fraction(1, 2 * 10**12)
