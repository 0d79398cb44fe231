"""A Python client generated from the served schema (openapi-python-client, as a user
would run it) submits, reads and cancels a job on the real cluster through a live portal."""

import importlib
import os
import subprocess
import sys
from pathlib import Path

import pytest

from accounts.models import ApiToken
from jobs.tests.conftest import GOOD_SPEC
from testing.servers import portal_stack
from testing.slurm import wait_for

pytestmark = [pytest.mark.slurm, pytest.mark.django_db(transaction=True)]

PACKAGE = "gpupool_client"


def generate_client(schema_url: str, directory: Path) -> None:
    """openapi-python-client's generate, from the URL without credentials (the schema is
    public), failing on any warning: a schema it cannot fully read fails this test."""
    config = directory / "config.yaml"
    # Invoices download as PDF, a job's folder as a zip, and a dataset upload's tus PATCH sends
    # application/offset+octet-stream: the generator takes them as octet streams (a file body), as a
    # user would configure it.
    # The schema is built on each request (about 3-6 s of CPU on a loaded 2-core machine), past the
    # generator's default 5 s wait.
    config.write_text(
        f"package_name_override: {PACKAGE}\nhttp_timeout: 60\n"
        "content_type_overrides:\n  application/pdf: application/octet-stream\n"
        "  application/zip: application/octet-stream\n  application/offset+octet-stream: application/octet-stream\n"
    )
    # It formats what it writes with ruff, found on PATH: the one in this virtualenv.
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "openapi_python_client",
            "generate",
            "--url",
            schema_url,
            "--meta",
            "none",
            "--output-path",
            str(directory / PACKAGE),
            "--config",
            str(config),
            "--fail-on-warning",
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=180,
    )
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.fixture
def client_package(tmp_path):
    """Import path for the client generated into tmp_path; forgotten again afterwards."""
    sys.path.insert(0, str(tmp_path))
    yield tmp_path
    sys.path.remove(str(tmp_path))
    for name in [name for name in sys.modules if name == PACKAGE or name.startswith(PACKAGE + ".")]:
        del sys.modules[name]


def test_a_generated_client_submits_reads_and_cancels_a_job(alice, provision, client_package, slurm):
    from django.conf import settings

    provision(alice)
    _token, key = ApiToken.issue(alice, "generated client")
    with portal_stack(worker=True, beat=True) as base_url:
        generate_client(f"{base_url}/api/schema/?format=json", client_package)
        client_module = importlib.import_module(PACKAGE)
        jobs = {
            name: importlib.import_module(f"{PACKAGE}.api.jobs.{name}")
            for name in [
                "jobs_submit",
                "jobs_create",
                "jobs_list",
                "jobs_retrieve",
                "jobs_logs",
                "jobs_cancel",
                "jobs_files_list",
                "jobs_files_download",
            ]
        }
        models = importlib.import_module(f"{PACKAGE}.models")
        client = client_module.AuthenticatedClient(base_url=base_url, token=key, raise_on_unexpected_status=True)

        def spec(**overrides):
            fields = {**GOOD_SPEC, "gpu_type": models.GpuTypeEnum(GOOD_SPEC["gpu_type"]), **overrides}
            return models.JobSpecInput(**fields)

        # A refusal comes back as the declared Error, with the field named.
        refused = jobs["jobs_create"].sync(client=client, body=spec(image="nvcr.io/nvidia/pytorch:latest"))
        assert isinstance(refused, models.Error), refused
        assert "image" in refused.errors.to_dict()

        submitted = jobs["jobs_submit"].sync(
            client=client, body=spec(name="generated-client", command="echo started; sleep 300", cluster="any")
        )
        assert isinstance(submitted, models.Job), submitted
        # `any` with the portal's own cluster alone: there, with the scheduler's estimate as the reason.
        own = settings.SLURM_CLUSTER_NAME
        assert submitted.cluster == own and submitted.placement.startswith(f"{own} can start it "), submitted
        # Submitted inline: in Slurm when the API answers, its Slurm id in the answer.
        assert submitted.state == models.JobStateEnum.PENDING and submitted.slurm_job_id
        assert submitted.expected_start is None and submitted.cost is None  # null, read as None

        def running():
            job = jobs["jobs_retrieve"].sync(client=client, id=submitted.id)
            return job if job.state == models.JobStateEnum.RUNNING else None

        job = wait_for(running, timeout=120, what="the job to run")
        assert job.slurm_job_id and job.start_time is not None
        assert job.gpu_count == 1  # the GPU it holds, while it runs
        assert job.exit_code is None  # not ended yet

        logs = wait_for(
            lambda: (found := jobs["jobs_logs"].sync(client=client, id=job.id)) and "started" in found.stdout and found,
            # RUNNING comes from slurmd's Prolog event, before Pyxis has started the container: on a
            # loaded CI machine the first line took over 60 s to follow it once.
            timeout=180,
            # Within the API's own limit of API_LOG_READS_PER_MINUTE (60): polling every 0.25 s got
            # a 429 (and no `stdout`) when the job was slow to start on a loaded cluster.
            interval=1.5,
            what="the job's first line in its log",
        )
        assert logs.diagnosis == []
        # What the job wrote in its directory: listed, and downloaded as it is.
        listing = jobs["jobs_files_list"].sync(client=client, id=job.id)
        assert "stdout.log" in [entry.name for entry in listing.entries], listing
        downloaded = jobs["jobs_files_download"].sync_detailed(client=client, id=job.id, file_path="stdout.log")
        assert downloaded.status_code == 200 and b"started" in downloaded.content
        listed = jobs["jobs_list"].sync(client=client, page_size=10, cluster=own)
        assert submitted.id in [item.id for item in listed.results]
        # A cluster no one has (and none of the caller's jobs ran on) is the declared Error, naming it.
        elsewhere = jobs["jobs_list"].sync(client=client, page_size=10, cluster="site-none")
        assert isinstance(elsewhere, models.Error), elsewhere
        assert "site-none" in elsewhere.errors.to_dict()["cluster"][0]

        cancelled = jobs["jobs_cancel"].sync(client=client, id=job.id)
        assert isinstance(cancelled, models.Job), cancelled

        def ended():
            found = jobs["jobs_retrieve"].sync(client=client, id=job.id)
            return found if found.state == models.JobStateEnum.CANCELLED else None

        final = wait_for(ended, timeout=60, what="the job to be cancelled")
        assert final.end_time is not None and final.expected_end is None
        # A second cancel is refused with the declared 409 body.
        again = jobs["jobs_cancel"].sync_detailed(client=client, id=job.id)
        assert again.status_code == 409 and isinstance(again.parsed, models.Error)
    assert slurm.get_job(final.slurm_job_id).state == "CANCELLED"


@pytest.mark.django_db(transaction=True)
def test_a_generated_client_reads_and_changes_the_callers_plan(alice, client_package):
    """No Slurm needed: alice has no cluster account, so the change touches the database only."""
    from django.conf import settings

    from plans.catalog import plan_for

    _token, key = ApiToken.issue(alice, "generated client")
    with portal_stack() as base_url:
        generate_client(f"{base_url}/api/schema/?format=json", client_package)
        client_module = importlib.import_module(PACKAGE)
        show = importlib.import_module(f"{PACKAGE}.api.plan.plan_show")
        change = importlib.import_module(f"{PACKAGE}.api.plan.plan_change")
        models = importlib.import_module(f"{PACKAGE}.models")
        client = client_module.AuthenticatedClient(base_url=base_url, token=key, raise_on_unexpected_status=True)

        standing = show.sync(client=client)
        assert (standing.code, standing.monthly_price, standing.can_pause) == ("pro", "299.000000", True)
        assert {offer.code for offer in standing.offered} >= {"free", "pro", "enterprise"}
        paused = change.sync(client=client, body=models.PlanChoice(action=models.ActionEnum.PAUSE))
        assert paused.status == models.SubscriptionStatusEnum.PAUSED and paused.can_resume
        refused = change.sync_detailed(client=client, body=models.PlanChoice(action=models.ActionEnum.PAUSE))
        assert (
            refused.status_code == 409
            and refused.parsed.detail == "Your Pro plan is not active, so it cannot be paused."
        )

        # The clusters she may pick from: the portal's own, not probed in this test (no beat).
        clusters = importlib.import_module(f"{PACKAGE}.api.clusters.clusters_list").sync(client=client)
        assert [(c.name, c.primary, getattr(c.state, "value", c.state)) for c in clusters] == [
            (settings.SLURM_CLUSTER_NAME, True, "unknown")
        ]
        assert clusters[0].error is None and clusters[0].gpu_types == list(settings.GPU_TYPES)
    assert plan_for(alice).is_paused


def test_a_generated_client_starts_reads_and_stops_a_session(alice, provision, client_package, slurm):
    """Sessions (interactive/) over the same generated client: created with `kind`, ready with a
    `url` once JupyterLab answers (the worker watches it start), stopped."""
    provision(alice)
    _token, key = ApiToken.issue(alice, "generated client")
    with portal_stack(worker=True, beat=True) as base_url:
        generate_client(f"{base_url}/api/schema/?format=json", client_package)
        client_module = importlib.import_module(PACKAGE)
        sessions = {
            name: importlib.import_module(f"{PACKAGE}.api.sessions.{name}")
            for name in ["sessions_create", "sessions_list", "sessions_retrieve", "sessions_stop"]
        }
        models = importlib.import_module(f"{PACKAGE}.models")
        client = client_module.AuthenticatedClient(base_url=base_url, token=key, raise_on_unexpected_status=True)
        body = models.SessionInput(
            kind=models.SessionInputKindEnum("jupyterlab"),
            image="nvcr.io/nvidia/pytorch:24.05-py3",
            gpu_type=models.GpuTypeEnum("rtx4090"),
            gpu_count=1,
            time_limit_minutes=30,
        )
        refused = sessions["sessions_create"].sync(
            client=client,
            body=models.SessionInput.from_dict(
                {**body.to_dict(), "image": "nvcr.io/nvidia/cuda:12.4.1-cudnn-runtime-ubuntu22.04"}
            ),
        )
        assert isinstance(refused, models.Error) and "image" in refused.errors.to_dict()
        created = sessions["sessions_create"].sync(client=client, body=body)
        assert isinstance(created, models.Session), created
        assert created.url is None

        def ready():
            found = sessions["sessions_retrieve"].sync(client=client, id=created.id)
            return found if found.state == models.SessionStateEnum.READY else None

        session = wait_for(ready, timeout=180, interval=1, what="the session to be ready")
        assert session.url.startswith("http://s-") and session.url.endswith("/lab")
        assert float(session.server_start_seconds) > 0
        assert created.id in [item.id for item in sessions["sessions_list"].sync(client=client).results]
        stopped = sessions["sessions_stop"].sync(client=client, id=created.id)
        assert isinstance(stopped, models.Session)

        def ended():
            found = sessions["sessions_retrieve"].sync(client=client, id=created.id)
            return found if found.state == models.SessionStateEnum.STOPPED else None

        final = wait_for(ended, timeout=60, what="the session to stop")
        assert final.stop_reason == models.StopReasonEnum.USER and final.url is None
