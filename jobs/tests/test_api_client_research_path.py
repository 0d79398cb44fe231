"""A researcher's whole path through a Python client generated from the served OpenAPI document
(openapi-python-client, as in test_api_client.py), against the real portal (web process, worker,
beat) on the real cluster: a small dataset uploaded over tus and committed until ready, its version
id read from the dataset list; a job mounting it at /data/<name> that counts the CSV's lines into a
file of its own directory; that file found in the job's listing and downloaded with the right
count; another user getting 404 for the job's files; and a TensorBoard of the job started, ready
and stopped."""

import importlib
import io

import pytest
from django.conf import settings

from accounts.models import ApiToken
from datasets.actions.node_cache import sync_all_node_features
from datasets.tests.conftest import metadata, sha256
from jobs.tests.conftest import GOOD_SPEC
from jobs.tests.test_api_client import PACKAGE, client_package, generate_client  # noqa: F401  (a fixture)
from testing.servers import portal_stack
from testing.slurm import wait_for

pytestmark = [pytest.mark.slurm, pytest.mark.first_release, pytest.mark.django_db(transaction=True)]

ROWS = 7
FILES = {
    "train.csv": ("x,label\n" + "".join(f"{n},{n % 2}\n" for n in range(ROWS))).encode(),
    "test.csv": b"x,label\n9,1\n",
    "README": b"digits, for the research path test\n",
}


@pytest.fixture(autouse=True)
def store(settings):
    # The nodes read the dev cluster's store; the test run's default is a temporary directory.
    settings.DATASET_STORE = settings.DEVCLUSTER_DIR / "root" / "srv/gpupool/datasets"
    return settings.DATASET_STORE


def test_a_generated_client_uploads_a_dataset_runs_a_job_on_it_and_downloads_its_result(
    alice,
    bob,
    provision,
    client_package,  # noqa: F811  (the fixture imported above)
    slurm,
    store,
):
    provision(alice)
    sync_all_node_features()  # no stale ds_<id> of an earlier test database on any node
    _token, key = ApiToken.issue(alice, "generated client")
    _token, bob_key = ApiToken.issue(bob, "generated client")
    with portal_stack(worker=True, beat=True, extra_env={"DATASET_STORE": str(store)}) as base_url:
        generate_client(f"{base_url}/api/schema/?format=json", client_package)
        client_module = importlib.import_module(PACKAGE)
        api = {
            name: importlib.import_module(f"{PACKAGE}.api.{name.split('_')[0]}.{name}")
            for name in [
                "datasets_create",
                "datasets_version_open",
                "datasets_upload_create",
                "datasets_upload_patch",
                "datasets_version_commit",
                "datasets_list",
                "jobs_submit",
                "jobs_retrieve",
                "jobs_files_list",
                "jobs_files_download",
                "sessions_create",
                "sessions_retrieve",
                "sessions_stop",
            ]
        }
        models = importlib.import_module(f"{PACKAGE}.models")
        types = importlib.import_module(f"{PACKAGE}.types")
        client = client_module.AuthenticatedClient(base_url=base_url, token=key, raise_on_unexpected_status=True)

        # 1. The dataset, its first version opened, each file declared and sent over tus, committed.
        dataset = api["datasets_create"].sync(client=client, body=models.DatasetInput(name="digits"))
        assert isinstance(dataset, models.Dataset), dataset
        opened = api["datasets_version_open"].sync(client=client, id=dataset.id)
        assert isinstance(opened, models.Version), opened
        for path, data in FILES.items():
            upload = api["datasets_upload_create"].sync(
                client=client,
                id=dataset.id,
                number=opened.number,
                tus_resumable=models.DatasetsUploadCreateTusResumable("1.0.0"),
                upload_length=len(data),
                upload_metadata=metadata(path=path, sha256=sha256(data)),
            )
            assert isinstance(upload, models.Upload) and upload.offset == 0, upload
            sent = api["datasets_upload_patch"].sync_detailed(
                client=client,
                id=dataset.id,
                number=opened.number,
                upload_id=upload.id,
                body=types.File(payload=io.BytesIO(data)),
                tus_resumable=models.DatasetsUploadPatchTusResumable("1.0.0"),
                upload_offset=0,
            )
            assert sent.status_code == 204 and sent.headers["Upload-Offset"] == str(len(data)), sent.content
        committed = api["datasets_version_commit"].sync(client=client, id=dataset.id, number=opened.number)
        assert committed.state == models.DatasetVersionStateEnum.VERIFYING, committed

        def ready():
            (found,) = [item for item in api["datasets_list"].sync(client=client) if item.id == dataset.id]
            (version,) = [item for item in found.versions if item.number == opened.number]
            assert version.state != models.DatasetVersionStateEnum.FAILED, version.error
            return version if version.state == models.DatasetVersionStateEnum.READY else None

        version = wait_for(ready, timeout=60, interval=0.5, what="the version to be ready")
        assert version.file_count == len(FILES)

        # 2. A job on it: reads /data/digits/train.csv, writes the count into its own directory.
        submitted = api["jobs_submit"].sync(
            client=client,
            body=models.JobSpecInput(
                **{
                    **GOOD_SPEC,
                    "gpu_type": models.GpuTypeEnum(GOOD_SPEC["gpu_type"]),
                    "name": "count-digits",
                    "command": "wc -l < /data/digits/train.csv > result.txt; echo done",
                    "datasets": [version.id],
                }
            ),
        )
        assert isinstance(submitted, models.Job), submitted

        active = {"SUBMITTING", "PENDING", "RUNNING", "COMPLETING", "SUSPENDED"}

        def ended():
            job = api["jobs_retrieve"].sync(client=client, id=submitted.id)
            return job if job.state not in active else None

        job = wait_for(ended, timeout=180, interval=1, what="the job to end")
        assert job.state == models.JobStateEnum.COMPLETED and job.exit_code == 0, job
        assert [(item.version, item.mounted_at) for item in job.datasets] == [(version.id, "/data/digits")]

        # 3. Its directory listed, result.txt in it, downloaded: the CSV's lines, header included.
        listing = api["jobs_files_list"].sync(client=client, id=job.id, path="")
        assert isinstance(listing, models.Listing), listing
        (entry,) = [item for item in listing.entries if item.name == "result.txt"]
        assert entry.kind == models.FileEntryKindEnum.FILE, entry
        downloaded = api["jobs_files_download"].sync_detailed(client=client, id=job.id, file_path=entry.path)
        assert downloaded.status_code == 200, downloaded.content
        assert downloaded.content.decode().strip() == str(FILES["train.csv"].count(b"\n")) == str(ROWS + 1)

        # 4. Another user learns nothing of them: 404, listed or downloaded.
        as_bob = client_module.AuthenticatedClient(base_url=base_url, token=bob_key)
        listed = api["jobs_files_list"].sync_detailed(client=as_bob, id=job.id)
        fetched = api["jobs_files_download"].sync_detailed(client=as_bob, id=job.id, file_path=entry.path)
        assert (listed.status_code, fetched.status_code) == (404, 404), (listed.content, fetched.content)

        # 5. A TensorBoard of the job: started, ready, stopped.
        board = api["sessions_create"].sync(
            client=client,
            body=models.SessionInput(
                kind=models.SessionInputKindEnum("tensorboard"),
                board_job=job.id,
                image=GOOD_SPEC["image"],
                gpu_type=models.GpuTypeEnum(GOOD_SPEC["gpu_type"]),
                gpu_count=1,
                time_limit_minutes=10,
            ),
        )
        assert isinstance(board, models.Session) and board.board_job == job.id, board

        def board_ready():
            shown = api["sessions_retrieve"].sync(client=client, id=board.id)
            assert shown.state.value in ("queued", "starting", "ready"), (shown.state, shown.error)
            return shown if shown.state.value == "ready" else None

        assert wait_for(board_ready, timeout=120, interval=1, what="the board to be ready").url
        api["sessions_stop"].sync_detailed(client=client, id=board.id)
    assert job.cluster == settings.SLURM_CLUSTER_NAME  # datasets run on the portal's own cluster
