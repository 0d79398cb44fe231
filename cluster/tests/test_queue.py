"""Pending jobs read in bulk with squeue (cluster/commands/queue.py): the parser on crafted output, and
the real dev cluster's squeue against slurmrestd's own answer for the same jobs."""

from concurrent.futures import ThreadPoolExecutor

import pytest

from cluster.clusters.services import slurm_cli
from cluster.commands.cli import CommandResult
from cluster.commands.queue import QUEUE_FIELDS, parse_queue, pending_job_details
from cluster.errors import SlurmCommandError
from testing.slurm import submit_held

MARKER = "@0123456789abcdef@"


def _record(**values) -> str:
    fields = {
        "JobID": "101",
        "ArrayTaskID": "N/A",
        "Name": "train",
        "UserName": "alice",
        "Account": "portal",
        "Partition": "gpu",
        "QOS": "pro",
        "State": "PENDING",
        "Reason": "Priority",
        "TRES-PER-NODE": "gres/gpu:a100:1",
        "Feature": "(null)",
        "SubmitTime": "2026-12-01T05:36:37",
        "StartTime": "2026-12-01T07:00:00",
        "EndTime": "2026-12-01T08:30:00",
        "TimeLimit": "1:30:00",
        "WorkDir": "/jobs/alice/1",
        "Comment": "(null)",
    }
    fields.update(values)
    return "".join(fields[name] + MARKER for name in QUEUE_FIELDS) + "\n"


def test_a_pending_record_becomes_a_job_with_the_listings_states():
    found = parse_queue(
        _record() + _record(JobID="102", TimeLimit="2-00:00:00"), MARKER, {101: ("PENDING",), 102: ("PENDING",)}
    )
    job = found[101]
    assert (job.name, job.user_name, job.account, job.qos, job.tres_per_node) == (
        "train",
        "alice",
        "portal",
        "pro",
        "gres/gpu:a100:1",
    )
    assert job.states == ("PENDING",) and job.state_reason == "Priority"
    assert job.submit_time.isoformat() == "2026-12-01T05:36:37+00:00"
    assert job.start_time.isoformat() == "2026-12-01T07:00:00+00:00"
    assert job.time_limit_minutes == 90 and found[102].time_limit_minutes == 2880
    assert job.comment == "" and job.constraints == "" and job.nodes == "" and job.exit_code is None


def test_free_text_with_commas_newlines_and_a_guessed_marker_stays_in_its_field():
    name = "a, b\nc@@" + "@ffffffffffffffff@" + "x"
    found = parse_queue(_record(Name=name, Comment="run 3, seed 7\n101"), MARKER, {101: ("PENDING",)})
    assert found[101].name == name and found[101].comment == "run 3, seed 7\n101"


def test_a_record_that_is_not_clean_is_left_for_the_fetch_by_id():
    listing = {101: ("PENDING",), 102: ("PENDING",), 103: ("PENDING",), 104: ("RUNNING",), 105: ("PENDING",)}
    listing[107] = ("PENDING",)
    output = (
        _record(JobID="102", ArrayTaskID="1-3")  # an array's tasks
        + _record(JobID="103", State="RUNNING")  # started since the listing
        + _record(JobID="104")  # the listing saw it running
        + _record(JobID="106")  # not asked for
        + _record(JobID="107", UserName="4242")  # a uid the login node could not name
        + _record(JobID="105")
        + _record(JobID="105")  # twice: neither is trusted
        + _record(JobID="101")
    )
    assert set(parse_queue(output, MARKER, listing)) == {101}


class AnsweringCli:
    """squeue's exit status and words, as the CLI gives them back."""

    def __init__(self, returncode: int, stderr: str = ""):
        self.returncode, self.stderr, self.asked = returncode, stderr, []

    def run(self, *args, check=True):
        self.asked.append(args)
        return CommandResult(list(args), self.returncode, "", self.stderr)


def test_squeue_run_in_utc_answers_nothing_for_a_gone_job_and_fails_loudly_otherwise():
    gone = AnsweringCli(1, "slurm_load_jobs error: Invalid job id specified\n")
    assert pending_job_details(gone, {5: ("PENDING",)}) == {}
    assert gone.asked[0][:4] == ("env", "TZ=UTC0", "SLURM_TIME_FORMAT=standard", "squeue")
    with pytest.raises(SlurmCommandError, match="Socket timed out"):
        pending_job_details(AnsweringCli(1, "slurm_load_jobs error: Socket timed out\n"), {5: ("PENDING",)})
    many = AnsweringCli(0)
    pending_job_details(many, {job_id: ("PENDING",) for job_id in range(1, 4502)})
    assert len(many.asked) == 3  # QUEUE_BATCH ids a run
    markers = {args[-1].split(":0", 2)[1].split(",")[0] for args in many.asked}
    assert len(markers) == 3 and all(marker.startswith("@") for marker in markers)  # a fresh one each run


def test_output_of_another_shape_reads_as_nothing():
    listing = {101: ("PENDING",)}
    assert parse_queue(_record()[: -len(MARKER) - 1] + "\n", MARKER, listing) == {}
    assert parse_queue("slurm_load_jobs error: Socket timed out\n", MARKER, listing) == {}
    assert parse_queue("", MARKER, listing) == {}


# What squeue and slurmrestd both say of a pending job.
SHARED_FIELDS = (
    "job_id", "name", "user_name", "account", "partition", "qos", "state_reason", "comment", "tres_per_node",
    "constraints", "submit_time", "start_time", "time_limit_minutes", "working_directory",
)  # fmt: skip


@pytest.mark.slurm
def test_squeue_reads_pending_jobs_as_slurmrestd_shows_them(slurm, cluster_users):
    client = slurm.as_user(cluster_users[0])
    names = ["plain", "a, b@c", "two\nlines", "x" + MARKER + "y"]
    with ThreadPoolExecutor(max_workers=4) as pool:
        ids = list(pool.map(lambda name: submit_held(client, name=name, comment=f"note: {name}"), names))
    ids.append(submit_held(client, name="shard", tres_per_node="gres/shard:a100:3", constraints="gpu_type:a100"))
    listing = {entry.job_id: entry.states for entry in slurm.list_job_states() if entry.job_id in ids}
    try:
        found = pending_job_details(slurm_cli(), listing)
        assert sorted(found) == sorted(ids)
        for job_id in ids:
            shown = slurm.get_job(job_id)
            read = found[job_id]
            assert {f: getattr(read, f) for f in SHARED_FIELDS} == {f: getattr(shown, f) for f in SHARED_FIELDS}
            assert read.states == shown.states == ("PENDING",)
        # A job gone from slurmctld is simply missing from the answer.
        assert pending_job_details(slurm_cli(), {999_999_001: ("PENDING",)}) == {}
    finally:
        slurm_cli().run("scancel", *map(str, ids), check=False)
