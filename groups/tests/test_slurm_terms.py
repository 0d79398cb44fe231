"""The group's account limits as values (no Slurm): one allowance for whole GPUs and shares
together, what the period used before the monthly reset taken off, a closed group held."""

from types import SimpleNamespace

from groups.slurm_terms import account_spec, allocated_minutes

TYPES = {"a100": {"shards_per_gpu": 10}, "h100": {"shards_per_gpu": 20}}


def _group(closed=False):
    return SimpleNamespace(
        slurm_account="g-lab", parent_account="o-pool", shares=3, closed_at="2026-01-01" if closed else None
    )


def _allocation(gpu_type, hours):
    return SimpleNamespace(gpu_type=gpu_type, approved_gpu_hours=hours)


def test_what_is_left_is_one_allowance_for_gpus_and_shares_together():
    minutes = allocated_minutes([_allocation("a100", 2)], {"a100": 30})  # 120 - 30 used last month
    assert minutes == {"a100": 90}
    # This month: 20 GPU-minutes of whole GPUs and 200 shard-minutes (20 GPU-minutes) used.
    spec = account_spec(_group(), TYPES, minutes, {"gres/gpu:a100": 20, "gres/shard:a100": 200})
    left = 90 - 20 - 20
    assert spec.gpu_minutes["gres/gpu:a100"] == 20 + left
    assert spec.gpu_minutes["gres/shard:a100"] == 200 + left * 10
    assert spec.gpu_minutes["gres/gpu:h100"] == 0 and spec.gpu_minutes["gres/shard:h100"] == 0
    assert spec.gpu_minutes["gres/gpu"] == 20 + left and spec.gpu_minutes["gres/shard"] == 200 + left * 10
    assert not spec.held


def test_used_up_means_no_more_of_either_kind_and_the_hold_percent_counts():
    spec = account_spec(_group(), TYPES, {"a100": 60}, {"gres/gpu:a100": 45, "gres/shard:a100": 300})
    assert spec.gpu_minutes["gres/gpu:a100"] == 45 and spec.gpu_minutes["gres/shard:a100"] == 300
    assert allocated_minutes([_allocation("a100", 10)], {}, hold_percent=50) == {"a100": 300}


def test_a_closed_group_gets_nothing_and_no_new_job():
    spec = account_spec(_group(closed=True), TYPES, {"a100": 600}, {"gres/gpu:a100": 5})
    assert spec.held and set(spec.gpu_minutes.values()) == {0}
    assert "GrpSubmitJobs=0" in spec.set_arguments()


def test_gpu_minutes_count_shards_as_their_part_of_a_gpu_whatever_is_missing():
    from decimal import Decimal

    from groups.tasks import _gpu_minutes

    assert _gpu_minutes({"gres/gpu:a100": Decimal("30")}, "a100") == 30  # no shard key: no float arithmetic
    assert _gpu_minutes({"gres/shard:a100": Decimal("100")}, "a100") == 10
    assert _gpu_minutes({}, "a100") == 0
