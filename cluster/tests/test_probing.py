"""What a probe's outcome does to a cluster's row: the first failure after an answer makes it
stale as of that answer; later failures keep that moment; an answer clears it; a failing
cluster rests between probes; a cluster that never answered is down."""

from datetime import timedelta

import pytest
from django.utils import timezone

from cluster.clusters.probing import ProbeResult, due, record
from cluster.clusters.registry import primary_cluster
from cluster.models import ClusterStatus

pytestmark = pytest.mark.django_db


def _row():
    return ClusterStatus.objects.get(name="site-b")


def test_stale_since_is_the_last_answer_and_an_answer_clears_it():
    record(ProbeResult("site-b", False, error="connection refused"))
    first = _row()
    assert first.state == "down" and first.stale_since == first.failing_since and first.last_error

    record(ProbeResult("site-b", True, "26.05.5", "v0.0.45"))
    answered = _row()
    assert answered.state == "up" and answered.stale_since is None and answered.last_error == ""
    assert (answered.slurm_release, answered.api_version) == ("26.05.5", "v0.0.45")

    record(ProbeResult("site-b", False, error="timed out"))
    record(ProbeResult("site-b", False, error="timed out again"))
    stale = _row()
    assert stale.state == "stale" and stale.stale_since == answered.last_answer_at
    assert stale.failing_since > answered.last_answer_at and stale.last_error == "timed out again"
    assert stale.slurm_release == "26.05.5"  # what it was, kept while it does not say


def test_a_failing_cluster_rests_between_probes(settings):
    settings.CLUSTER_PROBE_FAILING_INTERVAL_SECONDS = 12
    own = primary_cluster()
    other = own.__class__(**{**own.__dict__, "name": "site-b", "primary": False})
    record(ProbeResult("site-b", False, error="refused"))
    record(ProbeResult(own.name, True, "24.11.5", "v0.0.42"))
    now = timezone.now()
    assert [cluster.name for cluster in due([own, other], now)] == [own.name]
    assert [cluster.name for cluster in due([own, other], now + timedelta(seconds=13))] == [own.name, "site-b"]
