"""TensorBoard sessions: what a board may show (its owner's job or sweep, nobody else's), what its
job is told to mount and read, and the refusals in words that change nothing."""

import pytest

from interactive.actions import session_environment
from interactive.models import InteractiveSession
from jobs import protocol
from jobs.models import Job, JobArray, JobState, Sweep
from sweeps.submit import array_directory

pytestmark = pytest.mark.django_db

BODY = {
    "kind": "tensorboard",
    "image": "nvcr.io/nvidia/pytorch:24.05-py3",
    "gpu_type": "rtx4090",
    "gpu_count": 1,
    "time_limit_minutes": 30,
}


@pytest.fixture
def provisioned(alice):
    alice.profile.cluster_username = "alice"
    alice.profile.provisioned_at = "2026-01-01T00:00:00Z"
    alice.profile.save()
    return alice


def _finished_job(owner, slurm_job_id=7001):
    return Job.objects.create(
        owner=owner, slurm_job_id=slurm_job_id, state=JobState.COMPLETED, name="train", cluster_user="alice"
    )


def test_a_board_of_ones_own_job_mounts_its_directory_read_only_and_names_its_runs(provisioned, api_client_for):
    trained = _finished_job(provisioned)
    response = api_client_for(provisioned).post("/api/v1/sessions/", {**BODY, "board_job": trained.pk}, format="json")
    assert response.status_code == 201, response.content
    assert response.data["kind"] == "tensorboard" and response.data["board_job"] == trained.pk
    session = InteractiveSession.objects.get(pk=response.data["id"])
    assert session.job.cluster == trained.cluster
    environment = session_environment(session.job)
    directory = str(protocol.job_directory(trained))
    assert environment["GPUPOOL_READ_ONLY_DIRS"] == directory
    assert environment["GPUPOOL_BOARD_LOGDIRS"] == f"job-{trained.pk}:{directory}"
    assert environment["JUPYTER_TOKEN"] == session.token


def test_a_board_of_a_sweep_shows_every_array_of_it_side_by_side(provisioned):
    sweep = Sweep.objects.create(owner=provisioned, name="lr", spec={}, grid={}, point_count=6)
    first = JobArray.objects.create(sweep=sweep, offset=0, task_ids="0-3", task_count=4, slurm_array_job_id=900)
    later = JobArray.objects.create(sweep=sweep, offset=4, task_ids="0-1", task_count=2, slurm_array_job_id=950)
    never = JobArray.objects.create(sweep=sweep, offset=6, task_ids="0", task_count=1)  # not in Slurm
    for array in (first, later, never):
        Job.objects.create(owner=provisioned, array=array, array_task_id=0, name="lr", cluster_user="alice")
    board = InteractiveSession.objects.create(
        job=Job.objects.create(owner=provisioned, name="board"),
        owner=provisioned,
        kind="tensorboard",
        board_sweep=sweep,
    )
    environment = session_environment(board.job)
    first_dir, later_dir = (str(array_directory(array, "alice")) for array in (first, later))
    assert environment["GPUPOOL_READ_ONLY_DIRS"] == f"{first_dir}:{later_dir}"
    assert environment["GPUPOOL_BOARD_LOGDIRS"] == f"sweep:{first_dir},from-4:{later_dir}"


@pytest.mark.parametrize(
    "changes, field, words",
    [
        ({}, "board_job", "Choose the job or the sweep"),
        ({"board_job": "{job}", "board_sweep": 1}, "board_job", "one of them"),
        ({"board_job": 999999}, "board_job", "No job of yours"),
        ({"board_sweep": 999999}, "board_sweep", "No sweep of yours"),
        ({"board_job": "7"}, "board_job", "whole number"),
        ({"kind": "jupyterlab", "board_job": "{job}"}, "board_job", "Only a TensorBoard"),
        ({"kind": "vscode"}, "image", "does not ship VS Code"),  # NVIDIA's images carry no code-server
    ],
)
def test_a_refused_board_says_why_and_writes_nothing(provisioned, api_client_for, changes, field, words):
    trained = _finished_job(provisioned)
    body = {**BODY, **{key: (trained.pk if value == "{job}" else value) for key, value in changes.items()}}
    response = api_client_for(provisioned).post("/api/v1/sessions/", body, format="json")
    assert response.status_code == 400, response.content
    assert words in " ".join(response.data["errors"][field])
    assert not InteractiveSession.objects.exists() and Job.objects.count() == 1


def test_nobody_boards_another_users_job_or_sweep_nor_a_job_that_never_ran(provisioned, bob, api_client_for):
    theirs = _finished_job(bob, slurm_job_id=7100)
    their_sweep = Sweep.objects.create(owner=bob, name="secret", spec={}, grid={}, point_count=1)
    unsent = Job.objects.create(owner=provisioned, state=JobState.SUBMIT_FAILED, name="never")
    client = api_client_for(provisioned)
    for field, value, words in [
        ("board_job", theirs.pk, "No job of yours"),
        ("board_sweep", their_sweep.pk, "No sweep of yours"),
        ("board_job", unsent.pk, "never reached Slurm"),
    ]:
        response = client.post("/api/v1/sessions/", {**BODY, field: value}, format="json")
        assert response.status_code == 400 and words in response.data["errors"][field][0], response.content
    assert not InteractiveSession.objects.exists()


def test_a_board_runs_on_the_cluster_of_the_job_it_shows(provisioned, api_client_for):
    trained = _finished_job(provisioned)
    response = api_client_for(provisioned).post(
        "/api/v1/sessions/", {**BODY, "board_job": trained.pk, "cluster": "elsewhere"}, format="json"
    )
    assert response.status_code == 400 and "cluster" in response.data["errors"]
    assert not InteractiveSession.objects.exists()


def test_the_page_offers_the_owners_jobs_and_sweeps_and_nobody_elses(provisioned, bob, client):
    mine = _finished_job(provisioned)
    theirs = _finished_job(bob, slurm_job_id=7100)
    Sweep.objects.create(owner=provisioned, name="my-grid", spec={}, grid={}, point_count=3)
    Sweep.objects.create(owner=bob, name="their-grid", spec={}, grid={}, point_count=3)
    client.force_login(provisioned)
    page = client.get("/sessions/new/?kind=tensorboard").content.decode()
    assert f'value="{mine.pk}"' in page and "my-grid" in page
    assert f'value="{theirs.pk}"' not in page and "their-grid" not in page
    assert "New TensorBoard session" in page
