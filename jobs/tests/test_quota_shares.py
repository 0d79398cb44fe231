"""GPU-memory jobs count their share of a GPU against the plan's concurrent GPUs, not a whole
GPU each (a 12 GB job on a 40 GB A100 used to count as one A100)."""

import pytest

from jobs.models import Job, JobState
from jobs.submission.quota import QuotaExceeded, active_gpus_by_type, check_quota
from plans.catalog import plan_for

pytestmark = pytest.mark.django_db


def _running(owner, gpus=0, shards=0):
    return Job.objects.create(
        owner=owner, state=JobState.RUNNING, gpu_type="a100", quota_gpus=gpus, quota_shards=shards
    )


def test_shares_add_up_to_whole_gpus_of_the_quota(alice, settings):
    per_gpu = settings.GPU_TYPES["a100"]["shards_per_gpu"]
    plan = plan_for(alice)  # Pro: 2 A100 at once
    assert plan.gpu_quota["a100"] == 2
    _running(alice, gpus=1)
    _running(alice, shards=3)
    _running(alice, shards=3)
    check_quota(alice, plan, "a100", 0, per_gpu - 6)  # fills the second A100 exactly
    assert active_gpus_by_type(alice) == {"a100": 2}  # 1 whole + 6 shares, rounded up
    _running(alice, shards=per_gpu - 6)
    with pytest.raises(QuotaExceeded, match=r"2 are held or queued by your jobs and this job asks for 1 of"):
        check_quota(alice, plan, "a100", 0, 1)
    with pytest.raises(QuotaExceeded, match=r"asks for 1\.$"):
        check_quota(alice, plan, "a100", 1)
