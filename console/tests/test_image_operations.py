"""Console → Images: prewarm and remove a catalogue image on every node with progress, what each
node holds, how long images took to start; admins only.

The parsing tests read what the real node tool (deploy/node/gpupool-image-cache) prints, run
here on a temporary directory; the slurm test runs it on the dev cluster through sudo, in jobs
pinned to each node, driven by a real Celery worker, watched in Chromium at phone width."""

from __future__ import annotations

import json
import re
import secrets
import subprocess
from pathlib import Path

import pytest
from django.conf import settings
from django.test import Client

from cluster.models import Node
from console.actions import image_operations
from console.actions.image_operations import OperationRefused, parse_output
from console.models import CanaryCheck, CanaryRun, ImageOperation, ImageOperationNode, NodeImage

TOOL = Path(settings.BASE_DIR) / "deploy" / "node" / "gpupool-image-cache"
DIGEST = "sha256:" + "ab" * 32


def _tool(tmp_path: Path, *arguments: str) -> subprocess.CompletedProcess:
    """The node tool with its config file moved into tmp_path (the only change)."""
    images = tmp_path / "images"
    images.mkdir(exist_ok=True)
    (tmp_path / "catalogue").touch()
    conf = tmp_path / "image-cache.conf"
    conf.write_text(f"SOURCE=registry\nDIRECTORY={images}\nCATALOGUE={tmp_path / 'catalogue'}\n")
    script = tmp_path / "tool"
    script.write_text(TOOL.read_text().replace("CONF=/etc/gpupool/image-cache.conf", f"CONF={conf}"))
    # As the pinned job runs it: stdout and stderr in one log.
    return subprocess.run(
        ["bash", str(script), *arguments],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=30,
        check=False,
    )


@pytest.mark.pure
def test_the_tools_listing_and_a_kept_prewarm_are_read_back(tmp_path):
    (tmp_path / "images").mkdir()
    (tmp_path / "images" / "held.sqsh").write_bytes(b"x" * 4096)
    (tmp_path / "images" / "other.sqsh").write_bytes(b"y" * 10)
    result = _tool(tmp_path, "prewarm", f"nvcr.io/nvidia/pytorch:24.05-py3@{DIGEST}", "held.sqsh")
    assert result.returncode == 0, result.stdout
    outcome = parse_output(result.stdout)
    assert outcome.succeeded("prewarm") and outcome.summary("prewarm") == "already prewarmed"
    assert {name: size for name, (size, _) in outcome.files.items()} == {"held.sqsh": 4096, "other.sqsh": 10}
    # The importer's catalogue now names the file for the reference, once.
    _tool(tmp_path, "prewarm", f"nvcr.io/nvidia/pytorch:24.05-py3@{DIGEST}", "held.sqsh")
    assert (tmp_path / "catalogue").read_text() == f"nvcr.io/nvidia/pytorch:24.05-py3 {tmp_path}/images/held.sqsh\n"


@pytest.mark.pure
def test_a_removal_is_read_back_and_the_file_is_gone(tmp_path):
    (tmp_path / "images").mkdir()
    (tmp_path / "images" / "gone.sqsh").write_bytes(b"x")
    outcome = parse_output(_tool(tmp_path, "remove", "gone.sqsh").stdout)
    assert outcome.succeeded("remove") and outcome.listed and outcome.files == {}
    assert not (tmp_path / "images" / "gone.sqsh").exists()


@pytest.mark.pure
@pytest.mark.parametrize(
    "arguments, message",
    [
        (("prewarm", "x; rm -rf /", "a.sqsh"), "not a pinned reference"),
        (("prewarm", f"nvcr.io/nvidia/pytorch:24.05-py3@{DIGEST}", "../../etc/passwd.sqsh"), "not an image file name"),
        (("remove", "../x.sqsh"), "not an image file name"),
        (("remove", "a.sqsh", "b.sqsh"), "usage"),
    ],
)
def test_the_tool_refuses_bad_arguments_and_the_reason_reaches_the_row(tmp_path, arguments, message):
    result = _tool(tmp_path, *arguments)
    assert result.returncode != 0
    outcome = parse_output(result.stdout)
    assert message in outcome.failure("FAILED", "") and not outcome.succeeded(arguments[0])


@pytest.mark.pure
def test_a_failed_import_is_a_failure_with_enroots_reason(tmp_path):
    # No registry here: `enroot import` is not even installed on this host.
    result = _tool(tmp_path, "prewarm", f"nvcr.io/nvidia/pytorch:24.05-py3@{DIGEST}", "new.sqsh")
    assert result.returncode != 0 and not (tmp_path / "images" / "new.sqsh").exists()
    assert not list((tmp_path / "images").glob(".*part*"))  # no half file left behind
    assert "enroot import of nvcr.io/nvidia/pytorch:24.05-py3@" in parse_output(result.stdout).error


@pytest.mark.pure
def test_a_node_that_refuses_sudo_says_how_to_fix_it():
    outcome = parse_output("GPUPOOL_IMAGE_OPERATION node=n1\nsudo: a password is required\n")
    assert "sudoers rule" in outcome.failure("FAILED", "") and not outcome.listed


# --- starting, refusing, who may -------------------------------------------------------------------


def _nodes(*states):
    for index, (state, flags) in enumerate(states):
        Node.objects.create(name=f"n{index}", state=state, state_flags=flags)


@pytest.fixture
def ops_on(settings, admin_user):
    from django.utils import timezone

    settings.CLUSTER_OPS_GROUP = "gpupool-ops"
    profile = admin_user.profile
    profile.cluster_username, profile.provisioned_at = "ada", timezone.now()
    profile.save()
    return admin_user


@pytest.mark.django_db
def test_a_prewarm_has_a_part_per_node_and_down_nodes_are_failed_with_why(ops_on, django_capture_on_commit_callbacks):
    _nodes(("IDLE", ""), ("MIXED", ""), ("IDLE", "DRAIN"), ("DOWN", "NOT_RESPONDING"))
    image = settings.IMAGE_CATALOGUE.images[0]
    admin = Client()
    admin.force_login(ops_on)
    with django_capture_on_commit_callbacks() as callbacks:
        response = admin.post("/console/images/operations/", {"kind": "prewarm", "image": image.reference})
    assert response.status_code == 302
    assert len(callbacks) == 1  # the worker gets it once the rows are there
    operation = ImageOperation.objects.get()
    parts = {p.node: p for p in operation.nodes.all()}
    assert parts["n0"].state == parts["n1"].state == "submitting"
    assert parts["n2"].state == "failed" and "DRAIN" in parts["n2"].result
    assert parts["n3"].state == "failed" and "DOWN" in parts["n3"].result
    assert operation.file == image.prewarm_file
    # The script is the tool with the catalogue's pinned reference, as one quoted argument each.
    assert f"sudo -n {image_operations.TOOL} prewarm {image.pinned_reference} {image.prewarm_file}" in (
        image_operations.node_script(operation)
    )
    with pytest.raises(OperationRefused, match="still running"):
        image_operations.start(ops_on, "remove", image.reference)
    assert ImageOperation.objects.count() == 1


@pytest.mark.django_db
def test_the_beats_sweep_finishes_an_operation_whose_task_chain_was_lost(ops_on):
    from audit.models import AuditLog
    from console.tasks import advance_image_operations

    operation = ImageOperation.objects.create(kind="inventory", requested_by=ops_on)
    ImageOperationNode.objects.create(operation=operation, node="n0", state="done", result="1 image(s) listed")
    ImageOperationNode.objects.create(operation=operation, node="n1", state="failed", result="not tried")
    assert advance_image_operations() == 1
    operation.refresh_from_db()
    assert operation.finished_at is not None
    entry = AuditLog.objects.get(action="image.inventory.finished")
    assert entry.succeeded is False and entry.result == "1 of 2 nodes done; failed: n1"
    assert advance_image_operations() == 0  # nothing left; the audit entry is written once
    assert AuditLog.objects.filter(action="image.inventory.finished").count() == 1


@pytest.mark.django_db
def test_slurm_down_halfway_keeps_the_part_with_its_error_and_gives_up_after_the_retry_window(ops_on, settings):
    """No slurmrestd answering (the discard port): the node's part goes back to waiting for a
    submission with Slurm's error on it, tried again on the next passes; given up after
    SUBMIT_RETRY_FOR, failed with that error. Nothing is lost or submitted twice."""
    from datetime import timedelta

    settings.SLURMRESTD_URL = "http://127.0.0.1:9"
    _nodes(("IDLE", ""))
    operation = image_operations.start(ops_on, "inventory")
    assert image_operations.advance(operation.pk) is False
    part = operation.nodes.get()
    assert part.state == "submitting" and part.job is None
    assert part.result.startswith("Slurm did not take the job")
    ImageOperation.objects.filter(pk=operation.pk).update(
        created_at=operation.created_at - image_operations.SUBMIT_RETRY_FOR - timedelta(seconds=1)
    )
    assert image_operations.advance(operation.pk) is True
    part.refresh_from_db()
    assert part.state == "failed" and "Slurm did not take the job" in part.result


@pytest.mark.django_db
def test_an_image_outside_the_catalogue_or_no_operators_group_is_refused_and_nothing_is_recorded(ops_on, settings):
    _nodes(("IDLE", ""))
    with pytest.raises(OperationRefused, match="not in the image catalogue"):
        image_operations.start(ops_on, "prewarm", "evil/image:1")
    settings.CLUSTER_OPS_GROUP = ""
    with pytest.raises(OperationRefused, match="CLUSTER_OPS_GROUP"):
        image_operations.start(ops_on, "inventory")
    assert not ImageOperation.objects.exists() and not ImageOperationNode.objects.exists()


@pytest.mark.django_db
def test_only_admins_see_or_start_image_operations(alice, marketer, ops_on):
    _nodes(("IDLE", ""))
    operation = ImageOperation.objects.create(kind="inventory", requested_by=ops_on)
    for person in (alice, marketer):
        browser = Client()
        browser.force_login(person)
        assert browser.get("/console/images/").status_code == 403
        assert browser.get(f"/console/images/operations/{operation.pk}.json").status_code == 403
        assert browser.post("/console/images/operations/", {"kind": "inventory"}).status_code == 403
    assert ImageOperation.objects.count() == 1
    admin = Client()
    admin.force_login(ops_on)
    assert admin.get(f"/console/images/operations/{operation.pk}.json").json()["nodes_total"] == 0


@pytest.mark.django_db
def test_the_page_shows_what_each_node_listed(ops_on):
    from django.utils import timezone

    _nodes(("IDLE", ""), ("IDLE", ""))
    held = settings.IMAGE_CATALOGUE.images[0]
    now = timezone.now()
    NodeImage.objects.create(node="n1", file=held.prewarm_file, bytes=2048, modified_at=now, reported_at=now)
    NodeImage.objects.create(node="n0", file="leftover.sqsh", bytes=1, modified_at=now, reported_at=now)
    admin = Client()
    admin.force_login(ops_on)
    page = admin.get("/console/images/").content.decode()
    row = re.search(rf'<tr data-image="{re.escape(held.reference)}">.*?</tr>', page, re.S)[0]
    assert 'data-count="1"' in row and "1 of 2" in row
    node_row = re.search(r'<tr data-node="n1">.*?</tr>', page, re.S)[0]
    assert f'data-held="{held.reference}"' in node_row and "2.0\xa0KB" in node_row
    assert "leftover.sqsh" in page  # on a node, not in the catalogue: shown, not hidden
    for image in settings.IMAGE_CATALOGUE.images:
        assert image.reference in page


# --- on the dev cluster, in Chromium --------------------------------------------------------------

playwright_api = pytest.importorskip("playwright.sync_api")
PHONE = {"width": 390, "height": 844}


def _new_catalogue_image(tmp_path: Path):
    """The shipped catalogue plus one image no node has (a fresh tag each run), as a file the
    portal's processes load through IMAGE_CATALOGUE_FILE."""
    from foundation.images import load_image_catalogue

    data = json.loads(Path(settings.IMAGE_CATALOGUE_FILE).read_text())
    entry = dict(data["images"][0])
    entry["tag"] = f"99.{secrets.randbelow(10**6)}-py3"
    entry["title"] = "NVIDIA PyTorch (new)"
    data["images"].append(entry)
    path = tmp_path / "images.json"
    path.write_text(json.dumps(data))
    catalogue = load_image_catalogue(path)
    return path, catalogue, next(i for i in catalogue.images if i.tag == entry["tag"])


@pytest.mark.slurm
@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_an_admin_prewarms_a_new_image_on_every_node_with_progress_then_removes_it(
    admin_user, alice, provision, slurm, settings, tmp_path
):
    from cluster.clusters.services import job_paths
    from jobs import actions, protocol
    from jobs.container_starts import record_container_start
    from jobs.models import ContainerStart
    from jobs.submission.spec import SpecPolicy, parse_job_spec
    from jobs.tasks import run_sync
    from jobs.tests.conftest import GOOD_SPEC
    from plans.catalog import plan_for
    from testing.browser import log_in
    from testing.servers import CHROMIUM_ARGS, CHROMIUM_PATH, portal_stack
    from testing.slurm import wait_for

    if settings.JOB_RUNTIME != "pyxis" or not settings.CLUSTER_OPS_GROUP:
        pytest.fail("the dev cluster must run containers and have the image tool (cluster.sh up)")
    expect = playwright_api.expect
    catalogue_file, catalogue, image = _new_catalogue_image(tmp_path)
    settings.IMAGE_CATALOGUE = catalogue
    provision(admin_user)
    provision(alice)
    run_sync()  # the node mirror
    nodes = sorted(Node.objects.values_list("name", flat=True))
    local_file = settings.DEVCLUSTER_DIR / "root" / image.prewarm_path.lstrip("/")
    try:
        with (
            playwright_api.sync_playwright() as playwright,
            portal_stack(worker=True, beat=True, extra_env={"IMAGE_CATALOGUE_FILE": str(catalogue_file)}) as base_url,
        ):
            browser = playwright.chromium.launch(executable_path=CHROMIUM_PATH, args=CHROMIUM_ARGS)
            try:
                errors = []
                page = browser.new_context(viewport=PHONE).new_page()
                page.on("pageerror", lambda error: errors.append(error))
                page.on("dialog", lambda dialog: dialog.accept())
                log_in(page, base_url, "ada", "pw-ada")
                page.goto(f"{base_url}/console/images/")
                row = page.locator(f'tr[data-image="{image.reference}"]')
                expect(row.locator("[data-count]")).to_have_attribute("data-count", "0")
                row.locator("[data-prewarm]").click()
                live = page.locator("[data-operation][data-unfinished]").first
                expect(live).to_be_visible()
                page.evaluate("window.notReloaded = true")
                # Progress while it runs; the catalogue and the node grid follow in place.
                expect(page.locator("[data-operation]").first.locator("[data-summary]")).to_contain_text(
                    f"{len(nodes)} of {len(nodes)} node{'s' if len(nodes) != 1 else ''} done", timeout=150_000
                )
                expect(page.locator("[data-operation]").first.locator("[data-summary]")).to_contain_text("finished")
                expect(row.locator("[data-count]")).to_have_attribute("data-count", str(len(nodes)), timeout=15_000)
                for node in nodes:
                    expect(page.locator(f'tr[data-node="{node}"] [data-held="{image.reference}"]')).to_be_visible()
                assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
                assert page.evaluate("window.notReloaded") is True
                expect(page.locator("[data-live-updated]")).to_contain_text("nothing more is changing")
                operation = ImageOperation.objects.get(kind="prewarm", image=image.reference)
                parts = list(operation.nodes.all())
                assert all(p.state == "done" for p in parts), [(p.node, p.result) for p in parts]
                # The dev nodes share one directory: one imported it, the others found it there.
                assert any(p.result.startswith("imported in") for p in parts)
                assert local_file.is_file()

                # A user's job runs in the freshly prewarmed image: its marker, from inside.
                settings.SUBMIT_INLINE = True
                spec = parse_job_spec(
                    {**GOOD_SPEC, "image": image.reference, "command": "echo image=$(cat /gpupool/image)"},
                    plan=plan_for(alice),
                    policy=SpecPolicy.from_settings(),
                )
                job = actions.submit(alice, spec)
                job.refresh_from_db()
                assert job.slurm_job_id, job.error
                stdout = job_paths().to_local(protocol.job_directory(job)) / "stdout.log"
                wait_for(
                    lambda: stdout.exists() and f"image={image.reference}" in stdout.read_text(),
                    timeout=90,
                    what="the job's output from inside the new image",
                )

                def started():
                    run_sync()
                    return record_container_start(job.pk)

                start = wait_for(started, timeout=90, what="the job to end and its start to be timed")
                assert start.image == image.reference and 0 < start.seconds < 60
                assert ContainerStart.objects.filter(image=image.reference).count() == 1

                # The image change's canary: a container of the new image on each node that took it,
                # settled by the portal's beat before the image goes again.
                canary_run = CanaryRun.objects.get(trigger=CanaryRun.Trigger.IMAGE_PREWARMED)
                assert canary_run.image == image.reference and canary_run.started_by == admin_user
                wait_for(
                    lambda: (
                        canary_run.checks.exists()
                        and not canary_run.checks.filter(state=CanaryCheck.State.RUNNING).exists()
                    ),
                    timeout=180,
                    what="the canary after the prewarm to settle",
                )
                checks = list(canary_run.checks.all())
                assert sorted(check.node for check in checks) == nodes
                assert all(check.state == CanaryCheck.State.PASSED for check in checks), [c.detail for c in checks]

                page.goto(f"{base_url}/console/images/")
                expect(row.locator("[data-starts]")).to_contain_text("first start")
                row.locator("[data-remove]").click()
                expect(page.locator("[data-operation]").first.locator("[data-summary]")).to_contain_text(
                    "finished", timeout=120_000
                )
                expect(row.locator("[data-count]")).to_have_attribute("data-count", "0", timeout=15_000)
                assert not local_file.exists()
                assert errors == []

                # Nobody else sees any of it.
                other = browser.new_context(viewport=PHONE).new_page()
                log_in(other, base_url, "alice", "pw-alice")
                assert other.goto(f"{base_url}/console/images/").status == 403
                assert other.goto(f"{base_url}/console/images/operations/{operation.pk}.json").status == 403
            finally:
                browser.close()
    finally:
        local_file.unlink(missing_ok=True)
        catalogue_lines = settings.DEVCLUSTER_DIR / "root/etc/enroot/image-catalogue"
        kept = [line for line in catalogue_lines.read_text().splitlines() if not line.startswith(image.reference + " ")]
        catalogue_lines.write_text("\n".join(kept) + "\n")


@pytest.mark.django_db
def test_a_finished_prewarm_starts_one_canary_in_that_image_on_the_nodes_that_took_it(admin_user, canary_submissions):
    from console.actions import image_operations

    submitted = canary_submissions
    reference = "nvcr.io/nvidia/pytorch:24.05-py3"
    operation = ImageOperation.objects.create(kind="prewarm", image=reference, requested_by=admin_user)
    for node, state in (("gpu-a100-01", "done"), ("gpu-a100-02", "failed"), ("gpu-4090-01", "done")):
        ImageOperationNode.objects.create(operation=operation, node=node, state=state)
    image_operations._finish(operation)
    image_operations._finish(operation)  # a second pass: finished already, nothing more
    (run,) = CanaryRun.objects.all()
    assert (run.trigger, run.image, run.started_by) == (CanaryRun.Trigger.IMAGE_PREWARMED, reference, admin_user)
    assert submitted == [(run.pk, ["gpu-4090-01", "gpu-a100-01"])]

    removal = ImageOperation.objects.create(kind="remove", image=reference, requested_by=admin_user)
    ImageOperationNode.objects.create(operation=removal, node="gpu-a100-01", state="done")
    image_operations._finish(removal)
    assert CanaryRun.objects.count() == 1  # a removal is no image to check
