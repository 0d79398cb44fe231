"""Placement: sbatch --test-only's answer read (both releases' wording, captured from the dev
clusters), estimates compared, and the reason a user reads."""

from datetime import UTC, datetime, timedelta

import pytest

from cluster.clusters.placement import (
    JobShape,
    StartEstimate,
    choose,
    estimate_arguments,
    estimate_everywhere,
    parse_estimate,
)
from cluster.clusters.registry import ClusterConfig
from cluster.commands.cli import CommandResult
from cluster.errors import SlurmCommandError

pytestmark = pytest.mark.pure
NOW = datetime(2026, 12, 3, 18, 0, tzinfo=UTC)
SHAPE = JobShape("gpu", "gres/gpu:a100:2,gres/nvme:50", 30)
# What each release printed for `sbatch --test-only` on the dev clusters (2026-12-03).
ANSWER_24_11 = "sbatch: Job 1 to start at 2026-12-03T18:47:52 using 1 processors on nodes gpu-a100-01 in partition gpu"
ANSWER_26_05 = (
    "sbatch: Job 1 to start at 2026-12-03T18:47:52 a using 1 processors on nodes gpu-a100-01 in partition gpu"
)


def _cluster(name, zone="UTC"):
    return ClusterConfig(name=name, slurmrestd_url="http://x", jwt_key_file="/k", cli_prefix=(), time_zone=zone)


@pytest.mark.parametrize("answer", [ANSWER_24_11, ANSWER_26_05])
def test_both_releases_answers_are_read(answer):
    start, nodes, partition = parse_estimate(answer, "UTC")
    assert start == datetime(2026, 12, 3, 18, 47, 52, tzinfo=UTC)
    assert (nodes, partition) == ("gpu-a100-01", "gpu")


def test_the_start_is_read_in_the_clusters_time_zone():
    start, _, _ = parse_estimate(ANSWER_24_11, "Europe/Berlin")
    assert start == datetime(2026, 12, 3, 17, 47, 52, tzinfo=UTC)


def test_an_answer_without_an_estimate_is_none():
    assert parse_estimate("sbatch: error: Batch job submission failed: Invalid partition", "UTC") is None


def test_the_estimate_asks_for_the_jobs_shape_in_checked_arguments():
    assert estimate_arguments(SHAPE) == [
        "sbatch",
        "--test-only",
        "--partition=gpu",
        "--gres=gpu:a100:2,nvme:50",
        "--time=30",
        "--job-name=placement-estimate",
        "--wrap=true",
    ]


class FakeCli:
    def __init__(self, answer=None, error=None):
        self.answer, self.error, self.asked = answer, error, []

    def run(self, *args, **kwargs):
        self.asked.append(args)
        if self.error:
            raise SlurmCommandError(self.error)
        return CommandResult(list(args), 0, "", self.answer)


def test_each_cluster_is_asked_and_one_not_answering_is_not():
    clis = {
        "a": FakeCli(ANSWER_24_11),
        "b": FakeCli(error="sbatch: error: Batch job submission failed: Requested node configuration is not available"),
        "c": FakeCli(ANSWER_24_11),
    }
    since = datetime(2026, 12, 3, 17, 5, tzinfo=UTC)
    estimates = estimate_everywhere(
        [_cluster("a"), _cluster("b"), _cluster("c")], SHAPE, clis.__getitem__, not_answering={"c": since}
    )
    assert [estimate.cluster for estimate in estimates] == ["a", "b", "c"]
    assert estimates[0].start == datetime(2026, 12, 3, 18, 47, 52, tzinfo=UTC)
    assert estimates[1].start is None and "Requested node configuration is not available" in estimates[1].error
    assert estimates[2].error == "c is not answering since 17:05 UTC"
    assert clis["c"].asked == []


def test_the_earliest_start_wins_and_the_reason_names_the_others():
    estimates = [
        StartEstimate("own", start=NOW + timedelta(minutes=40)),
        StartEstimate("site-b", start=NOW + timedelta(minutes=5)),
        StartEstimate("site-c", error="site-c cannot run it: Invalid partition"),
    ]
    placement = choose(estimates, own="own", now=NOW)
    assert placement.cluster == "site-b"
    assert placement.reason == (
        "site-b can start it at 18:05 UTC, 35 minutes before any other; own at 18:40 UTC; "
        "site-c cannot run it: Invalid partition."
    )


def test_a_tie_stays_on_the_portals_own_cluster_and_a_start_in_the_past_is_now():
    estimates = [
        StartEstimate("site-b", start=NOW - timedelta(minutes=3)),
        StartEstimate("own", start=NOW + timedelta(seconds=20)),
    ]
    placement = choose(estimates, own="own", now=NOW)
    assert placement.cluster == "own"
    assert placement.reason == "own can start it now (as soon as elsewhere: the portal's own cluster); site-b now."


def test_no_estimate_anywhere_is_no_placement_with_every_reason():
    placement = choose(
        [StartEstimate("own", error="own cannot run it: x"), StartEstimate("b", error="b is not answering")],
        own="own",
        now=NOW,
    )
    assert placement.cluster is None
    assert placement.reason == "No cluster can start this job: own cannot run it: x; b is not answering."
