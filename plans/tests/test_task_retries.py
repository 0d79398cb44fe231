"""Tasks that meet a Slurm that is away try again with Celery's own back-off (15 s doubling to
at most 600 s), and stop after their limit with the error on the result."""

import pytest

from cluster.errors import SlurmTransientError
from plans import enforcement
from plans.tasks import sync_slurm_limits

pytestmark = pytest.mark.django_db


def test_a_passing_slurm_failure_is_tried_again_with_celerys_back_off(monkeypatch):
    calls = []

    def away():
        calls.append(1)
        raise SlurmTransientError("slurmctld is not answering")

    monkeypatch.setattr(enforcement, "sync", away)
    countdowns = []
    real_retry = sync_slurm_limits.retry

    def retry(*args, **kwargs):
        countdowns.append(kwargs.get("countdown"))
        return real_retry(*args, **kwargs)

    monkeypatch.setattr(sync_slurm_limits, "retry", retry)
    result = sync_slurm_limits.apply()
    assert isinstance(result.result, SlurmTransientError)
    assert len(calls) == 1 + sync_slurm_limits.max_retries
    assert countdowns == [15, 30, 60, 120, 240, 480, 600, 600, 600][: len(countdowns)]
    assert len(countdowns) >= sync_slurm_limits.max_retries


def test_it_succeeds_once_slurm_answers_again(monkeypatch):
    answers = iter([SlurmTransientError("away"), SlurmTransientError("away"), ["pro", "free"]])

    def sync():
        answer = next(answers)
        if isinstance(answer, Exception):
            raise answer
        return answer

    monkeypatch.setattr(enforcement, "sync", sync)
    assert sync_slurm_limits.apply().get() == 2
