"""Jobs in real containers: the image catalogue at submit, and pyxis + enroot on the dev cluster.

The slurm-marked tests need a dev cluster that cluster.sh built with containers (the default:
enroot and pyxis in its root, stand-in images prewarmed from deploy/images.json, each holding
/gpupool/image with its own name); JOB_RUNTIME is then `pyxis` by default (gpupool/settings.py).
"""

import secrets
import time
from pathlib import Path

import pytest
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from cluster.clusters.services import job_paths, rest_client, slurm_cli
from conftest import subscribe
from foundation.images import image_catalogue_from_mapping, load_image_catalogue
from jobs import actions, protocol
from jobs.diagnosis.diagnose import diagnose
from jobs.models import Job
from jobs.submission.spec import SpecError, SpecPolicy, parse_job_spec
from jobs.tests.conftest import GOOD_SPEC
from plans.product_plans import product_plan
from testing.slurm import wait_for, wait_for_state, wait_until_requeued

FREE_ONLY = "nvcr.io/nvidia/pytorch:24.05-py3"  # every plan
PRO_ONLY = "nvcr.io/nvidia/pytorch:25.01-py3"  # pro and enterprise in deploy/images.json
NOT_LISTED = "nvcr.io/nvidia/pytorch:23.01-py3"


def _policy(**changes) -> SpecPolicy:
    base = SpecPolicy.from_settings()
    return SpecPolicy(**{**base.__dict__, **changes})


def _parse(image: str, plan: str = "pro", **policy_changes):
    data = {**GOOD_SPEC, "image": image, "gpu_type": "rtx4090"}
    return parse_job_spec(data, plan=product_plan(plan), policy=_policy(**policy_changes))


# --- the catalogue (no database) ----------------------------------------------------------------


@pytest.mark.pure
def test_the_shipped_catalogue_is_valid_and_pins_every_image():
    catalogue = load_image_catalogue(settings.IMAGE_CATALOGUE_FILE)
    assert catalogue.images
    for image in catalogue.images:
        assert image.digest.startswith("sha256:") and len(image.digest) == 71
        assert image.plans and image.cuda and image.python
        assert image.prewarm_path.startswith("/opt/enroot/images/") and image.prewarm_path.endswith(".sqsh")
    # The free plan has images (docs/product.md: the official PyTorch and TensorFlow ones).
    frameworks = {image.framework for image in catalogue.for_plan("free")}
    assert {"pytorch", "tensorflow"} <= frameworks


@pytest.mark.pure
@pytest.mark.parametrize(
    "change, message",
    [
        ({"tag": "latest"}, "not latest"),
        ({"digest": "sha256:abc"}, "digest"),
        ({"plans": []}, "plans"),
        ({"repository": "Upper/Case"}, "repository"),
    ],
)
def test_a_bad_catalogue_entry_stops_with_its_reason(change, message):
    entry = {
        "repository": "nvcr.io/nvidia/pytorch",
        "tag": "24.05-py3",
        "digest": "sha256:" + "a" * 64,
        "title": "t",
        "framework": "pytorch",
        "framework_version": "2.4",
        "cuda": "12.4.1",
        "python": "3.10",
        "min_driver": "550.54",
        "plans": ["free"],
    }
    image_catalogue_from_mapping({"images": [entry]})
    with pytest.raises(ImproperlyConfigured, match=message):
        image_catalogue_from_mapping({"images": [{**entry, **change}]})
    with pytest.raises(ImproperlyConfigured, match="twice"):
        image_catalogue_from_mapping({"images": [entry, {**entry, "repository": "docker.io/nvcr.io/nvidia/pytorch"}]})


@pytest.mark.pure
def test_catalogue_images_are_found_by_tag_digest_or_both_and_docker_hub_spellings():
    catalogue = load_image_catalogue(settings.IMAGE_CATALOGUE_FILE)
    image = catalogue.by_reference()["pytorch/pytorch:2.3.0-cuda12.1-cudnn8-runtime"]
    assert catalogue.find("docker.io/pytorch/pytorch", image.tag, None) == (image, "")
    assert catalogue.find("pytorch/pytorch", None, image.digest) == (image, "")
    assert catalogue.find("pytorch/pytorch", image.tag, image.digest) == (image, "")
    assert catalogue.find("pytorch/pytorch", image.tag, "sha256:" + "0" * 64) == (image, "digest-mismatch")
    assert catalogue.find("pytorch/pytorch", "9.9", None) == (None, "not-listed")
    assert catalogue.find("acme/trainer", "1", None) == (None, "not-listed")


@pytest.mark.pure
def test_driver_older_than_the_images_cuda_needs():
    image = load_image_catalogue(settings.IMAGE_CATALOGUE_FILE).by_reference()[PRO_ONLY]
    assert image.driver_too_old("535.104.05")
    assert not image.driver_too_old("570.86.10")
    assert not image.driver_too_old("")


# --- refusal at submit, before Slurm ------------------------------------------------------------


@pytest.mark.pure
def test_an_image_outside_the_catalogue_is_refused_with_the_plans_choices():
    with pytest.raises(SpecError) as refused:
        _parse(NOT_LISTED, catalogue_only=True)
    message = " ".join(refused.value.errors["image"])
    assert "not in the pool's image catalogue" in message
    assert FREE_ONLY in message and PRO_ONLY in message
    # Where the nodes may pull (the catalogue not exclusive), the plan's own rule decides.
    assert _parse(NOT_LISTED, catalogue_only=False).image == NOT_LISTED


@pytest.mark.pure
def test_an_image_not_on_the_users_plan_is_refused():
    with pytest.raises(SpecError) as refused:
        _parse(PRO_ONLY, plan="free")
    message = " ".join(refused.value.errors["image"])
    assert f"{PRO_ONLY} is not available on your plan (Free)" in message
    assert FREE_ONLY in message and PRO_ONLY not in message.split("may use:")[1]
    assert _parse(PRO_ONLY, plan="pro").image == PRO_ONLY
    assert _parse(FREE_ONLY, plan="free").image == FREE_ONLY


@pytest.mark.pure
def test_a_digest_other_than_the_pinned_one_is_refused():
    image = load_image_catalogue(settings.IMAGE_CATALOGUE_FILE).by_reference()[FREE_ONLY]
    assert _parse(f"{FREE_ONLY}@{image.digest}").image == f"{FREE_ONLY}@{image.digest}"
    with pytest.raises(SpecError, match="is pinned at"):
        _parse(f"{FREE_ONLY}@sha256:{'0' * 64}")


@pytest.mark.django_db
def test_the_api_refuses_an_unlisted_image_with_a_400_and_creates_no_job(alice, api_client_for, settings):
    settings.IMAGE_CATALOGUE_ONLY = True
    alice.profile.cluster_username = "alice"
    alice.profile.save()
    response = api_client_for(alice).post("/api/v1/jobs/", {**GOOD_SPEC, "image": NOT_LISTED}, format="json")
    assert response.status_code == 400, response.content
    assert "not in the pool's image catalogue" in " ".join(response.json()["errors"]["image"])
    assert Job.objects.count() == 0


# --- on the cluster: inside the image ------------------------------------------------------------

needs_pyxis = pytest.mark.skipif(
    settings.JOB_RUNTIME != "pyxis", reason="this dev cluster runs jobs without containers (JOB_RUNTIME=none)"
)


def _node_data_dir() -> tuple[str, str]:
    """A directory under the first data root, on the nodes (the dev cluster's root), with a file."""
    name = f"ctr-{secrets.token_hex(4)}"
    path = f"{settings.DATA_MOUNT_ROOTS[0]}/{name}"
    local = settings.DEVCLUSTER_DIR / "root" / path.lstrip("/")
    local.mkdir(parents=True)
    local.chmod(0o755)
    (local / "hello.txt").write_text(f"data {name}\n")
    (local / "hello.txt").chmod(0o644)
    return path, f"data {name}"


def _submit(user, **changes) -> Job:
    from plans.catalog import plan_for

    spec = parse_job_spec({**GOOD_SPEC, **changes}, plan=plan_for(user), policy=SpecPolicy.from_settings())
    job = actions.submit(user, spec)
    job.refresh_from_db()
    assert job.slurm_job_id, job.error
    return job


def _stdout(job: Job) -> str:
    local = job_paths().to_local(protocol.job_directory(job)) / "stdout.log"
    return local.read_text() if local.exists() else ""


@pytest.mark.slurm
@pytest.mark.django_db(transaction=True)
@needs_pyxis
def test_a_job_runs_inside_its_image_with_its_data_gpus_and_output(alice, provision, slurm, settings):
    settings.SUBMIT_INLINE = True
    provision(alice)
    data, data_line = _node_data_dir()
    image = "nvcr.io/nvidia/tensorflow:24.05-tf2-py3"
    command = (
        "echo image=$(cat /gpupool/image); cat /data/hello.txt; echo gpus=$CUDA_VISIBLE_DEVICES; "
        "touch /data/written 2>/dev/null && echo data-writable || echo data-read-only; "
        "echo result > result.txt && echo wrote-output; python3 -c 'print(\"python ok\")'"
    )
    started = time.monotonic()
    job = _submit(alice, image=image, command=command, data_mount=data, gpu_type="a100", gpu_count=2)
    output = wait_for(lambda: "python ok" in _stdout(job) and _stdout(job), timeout=90, what="the container's output")
    first_output = time.monotonic() - started
    assert f"image={image}" in output  # the stand-in's marker: the command ran inside that image
    assert data_line in output
    assert "gpus=0,1" in output  # both GPUs, as Slurm bound them
    assert "data-read-only" in output
    assert "wrote-output" in output
    assert (job_paths().to_local(protocol.job_directory(job)) / "result.txt").read_text() == "result\n"
    done = wait_for_state(rest_client(), job.slurm_job_id, {"COMPLETED", "FAILED"})
    assert done.state == "COMPLETED", output
    print(f"submit to first output in the container: {first_output:.2f} s")  # the figure docs/containers.md quotes


@pytest.mark.slurm
@pytest.mark.django_db(transaction=True)
@needs_pyxis
def test_an_image_the_node_does_not_hold_fails_with_a_diagnosis(alice, provision, slurm, settings):
    settings.SUBMIT_INLINE = True
    settings.IMAGE_CATALOGUE_ONLY = False  # past the submit check, as if a node had lost its copy
    provision(alice)
    job = _submit(alice, image="ghcr.io/acme/trainer:1.0", command="echo should not run")
    done = wait_for_state(rest_client(), job.slurm_job_id, {"COMPLETED", "FAILED"})
    assert done.state == "FAILED"
    stderr = (job_paths().to_local(protocol.job_directory(job)) / "stderr.log").read_text()
    assert "should not run" not in _stdout(job)
    findings = diagnose(stderr, state="FAILED", exit_code=1)
    assert findings[0].rule_id == "image-not-on-node", [f.rule_id for f in findings]


@pytest.mark.slurm
@pytest.mark.django_db(transaction=True)
@needs_pyxis
def test_a_missing_data_mount_fails_with_a_diagnosis(alice, provision, slurm, settings):
    settings.SUBMIT_INLINE = True
    provision(alice)
    job = _submit(
        alice, command="echo should not run", data_mount=f"{settings.DATA_MOUNT_ROOTS[0]}/absent-{secrets.token_hex(3)}"
    )
    done = wait_for_state(rest_client(), job.slurm_job_id, {"COMPLETED", "FAILED"})
    assert done.state == "FAILED"
    stderr = (job_paths().to_local(protocol.job_directory(job)) / "stderr.log").read_text()
    assert diagnose(stderr, state="FAILED", exit_code=1)[0].rule_id == "container-mount-source"


def _container_processes(token: str) -> list[int]:
    """Processes on this machine whose command line holds `token` (the job's own command)."""
    pids = []
    for proc in Path("/proc").glob("[0-9]*"):
        try:
            if token.encode() in (proc / "cmdline").read_bytes():
                pids.append(int(proc.name))
        except OSError:
            continue
    return pids


@pytest.mark.slurm
@pytest.mark.django_db(transaction=True)
@needs_pyxis
def test_a_container_job_is_requeued_then_cancelled_and_leaves_nothing_running(alice, provision, slurm, settings):
    settings.SUBMIT_INLINE = True
    provision(alice)
    token = f"sleep-{secrets.token_hex(4)}"
    # `exec -a` names the sleep after the token, so its process can be found from the host.
    job = _submit(alice, command=f"cat /gpupool/image; exec -a {token} sleep 300")
    wait_for(lambda: GOOD_SPEC["image"] in _stdout(job), timeout=90, what="the container to start")
    wait_for(lambda: _container_processes(token), timeout=30, what="the container's process")

    slurm_cli().requeue_job(job.slurm_job_id)
    wait_until_requeued(rest_client(), job.slurm_job_id, timeout=90)
    wait_for(lambda: not _container_processes(token), timeout=30, what="the requeued run's container to end")

    job.refresh_from_db()
    actions.cancel(job)
    done = wait_for_state(rest_client(), job.slurm_job_id, {"CANCELLED"})
    assert done.state == "CANCELLED"
    assert not _container_processes(token)


@pytest.mark.django_db
def test_the_api_lists_the_plans_images_by_framework_and_cuda(alice, api_client_for):
    client = api_client_for(alice)  # on the Pro plan
    references = [image["reference"] for image in client.get("/api/v1/images/").json()]
    assert FREE_ONLY in references and PRO_ONLY in references
    tensorflow = client.get("/api/v1/images/", {"framework": "tensorflow"}).json()
    assert tensorflow and all(image["framework"] == "tensorflow" for image in tensorflow)
    cuda_12_4 = client.get("/api/v1/images/", {"cuda": "12.4"}).json()
    assert cuda_12_4 and all(image["cuda"].startswith("12.4") for image in cuda_12_4)
    subscribe(alice, "free")
    assert PRO_ONLY not in [image["reference"] for image in client.get("/api/v1/images/").json()]
