"""A dataset used from Debian's Chromium at phone width: chosen on the job form, read inside the
job's container at /data/<name>, and the job page says where it ran and that its data was cold,
then warm for the clone. The real portal (web process, worker, beat) on the real cluster."""

import hashlib
import re
import secrets

import pytest
from django.conf import settings

from datasets import actions
from datasets.actions.node_cache import sync_all_node_features
from datasets.models import DatasetVersion, VersionState
from datasets.tasks import verify_version
from jobs.models import Job
from testing.browser import chromium_page, fill_job_form, log_in
from testing.servers import portal_stack

playwright_api = pytest.importorskip("playwright.sync_api")
expect = playwright_api.expect

pytestmark = [
    pytest.mark.browser,
    pytest.mark.slurm,
    pytest.mark.first_release,
    pytest.mark.django_db(transaction=True),
]


@pytest.fixture(autouse=True)
def store(settings):
    # The nodes read the dev cluster's store; a test's temporary directory is not theirs to see.
    settings.DATASET_STORE = settings.DEVCLUSTER_DIR / "root" / "srv/gpupool/datasets"
    return settings.DATASET_STORE


def _ready_version(user, name: str, data: bytes) -> DatasetVersion:
    import io

    version = actions.open_version(actions.create_dataset(user, name=name), user)
    upload = actions.create_upload(version, user, path="notes.txt", length=len(data))
    actions.receive_chunk(upload, user, offset=0, stream=io.BytesIO(data))
    actions.commit_version(version, user)
    verify_version(version.pk)
    version.refresh_from_db()
    assert version.state == VersionState.READY, version.error
    return version


def test_a_job_chosen_on_the_form_reads_its_dataset_and_the_page_says_cold_then_warm(alice, provision, tmp_path):
    provision(alice)
    sync_all_node_features()  # no stale ds_<id> of an earlier test database on any node
    # Fresh content: copies are named by content, and an earlier run's would be warm already.
    data = f"the dataset's only line, {secrets.token_hex(8)}\n".encode()
    version = _ready_version(alice, "notes", data)
    store = {"DATASET_STORE": str(settings.DATASET_STORE)}
    with (
        chromium_page(playwright_api, width=390, height=844) as page,
        portal_stack(worker=True, beat=True, extra_env=store) as base_url,
    ):
        log_in(page, base_url, "alice", "pw-alice")
        errors = []
        page.on("pageerror", lambda error: errors.append(error))
        fill_job_form(page, base_url, name="on-notes", command="sha256sum /data/notes/notes.txt", gpu_type="a100")
        box = page.locator(f"input[name=datasets][value='{version.pk}']")
        expect(box.locator("xpath=..")).to_contain_text("notes v1")
        box.check()
        page.click("[data-submit]")
        page.wait_for_url(re.compile(r".*/jobs/\d+/$"))
        expect(page.locator("dl.facts [data-field=state_label]")).to_have_text("Completed", timeout=90000)
        expect(page.locator('[data-log="stdout"]')).to_contain_text(hashlib.sha256(data).hexdigest(), timeout=15000)
        section = page.locator("[data-job-datasets]")
        expect(section).to_contain_text("/data/notes")
        expect(section).to_contain_text(re.compile(r"cold: copied to gpu-a100-0\d's NVMe"), timeout=30000)
        page.screenshot(path=str(tmp_path / "job-on-dataset-phone.png"), full_page=True)
        width = page.evaluate("document.documentElement.scrollWidth")
        assert width <= 390 + 1, width

        page.click("[data-clone]")
        page.wait_for_url(re.compile(r".*/jobs/new/\?clone=\d+$"))
        expect(page.locator(f"input[name=datasets][value='{version.pk}']")).to_be_checked()
        page.fill("#id_name", "on-notes-again")
        page.click("[data-submit]")
        page.wait_for_url(re.compile(r".*/jobs/\d+/$"))
        expect(page.locator("dl.facts [data-field=state_label]")).to_have_text("Completed", timeout=90000)
        expect(page.locator("[data-job-datasets]")).to_contain_text(re.compile(r"warm on gpu-a100-0\d"), timeout=30000)
        assert errors == []
    first, second = Job.objects.filter(owner=alice).order_by("id")
    assert first.datasets.get().node == second.datasets.get().node
