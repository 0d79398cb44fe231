"""Datasets on the dev cluster's nodes: staged to a node's NVMe cache by deploy/node/gpupool-dataset-cache,
mounted read-only at /data/<name> inside the job's container, and preferred by the next job; an
admin's pin stages a version ahead and keeps it; a rotten warm copy is fetched again.

The store is the dev cluster's (inside its root, where the nodes see it), not a test's temporary
directory; version ids of a fresh test database may meet a store's leftovers, which the tool and
the portal are built to tell apart (copies are named by content, manifests rewritten).
"""

from __future__ import annotations

import os
import secrets
import subprocess
import time

import pytest
from django.conf import settings

from cluster.actions.mirror import mirror_nodes
from cluster.clusters.services import job_paths, rest_client
from cluster.models import Node
from cluster.records.types import JobSubmission
from conftest import subscribe
from datasets.actions.node_cache import feature_for, sync_all_node_features
from datasets.models import DatasetVersion, NodeCopy, VersionState
from jobs import actions as dataset_pins
from jobs import dataset_staging, protocol
from jobs.models import Job, JobDataset
from jobs.tests.conftest import GOOD_SPEC
from testing.slurm import wait_for, wait_for_state

needs_pyxis = pytest.mark.skipif(
    settings.JOB_RUNTIME != "pyxis", reason="this dev cluster runs jobs without containers (JOB_RUNTIME=none)"
)
pytestmark = [pytest.mark.slurm, pytest.mark.django_db(transaction=True), needs_pyxis]

# Inside the container: the version's manifest sha256 (datasets/manifest.py) of /data/<name>.
MANIFEST_SHA = (
    "import hashlib, os, sys\n"
    "root = sys.argv[1]\n"
    "rows = []\n"
    "for folder, _dirs, names in os.walk(root):\n"
    "    for name in names:\n"
    "        full = os.path.join(folder, name)\n"
    "        data = open(full, 'rb').read()\n"
    "        rows.append((os.path.relpath(full, root), len(data), hashlib.sha256(data).hexdigest()))\n"
    "rows.sort(key=lambda row: row[0].encode())\n"
    "text = ''.join(f'{sha} {size} {path}\\n' for path, size, sha in rows)\n"
    "print('manifest-sha256', hashlib.sha256(text.encode()).hexdigest())\n"
)


@pytest.fixture(autouse=True)
def store(settings):
    settings.DATASET_STORE = settings.DEVCLUSTER_DIR / "root" / "srv/gpupool/datasets"
    settings.SUBMIT_INLINE = True
    return settings.DATASET_STORE


def _ready_version(tus_for, user, dataset, files: dict[str, bytes]) -> DatasetVersion:
    tus = tus_for(user, dataset)
    for path, data in files.items():
        tus.upload(path, data, chunk=4 * 1024 * 1024)
    assert tus.commit().status_code == 202
    version = DatasetVersion.objects.get(dataset=dataset)
    assert version.state == VersionState.READY, version.error
    return version


def _submit(client, **changes) -> Job:
    body = {**GOOD_SPEC, "gpu_type": "a100", **changes}
    answer = client.post("/api/v1/jobs/", body, format="json")
    assert answer.status_code == 201, answer.content
    job = Job.objects.get(pk=answer.json()["id"])
    assert job.slurm_job_id, job.error
    return job


def _stdout(job: Job) -> str:
    local = job_paths().to_local(protocol.job_directory(job)) / "stdout.log"
    return local.read_text() if local.exists() else ""


def _finished(job: Job) -> Job:
    done = wait_for_state(rest_client(), job.slurm_job_id, {"COMPLETED", "FAILED", "CANCELLED"}, timeout=120)
    assert done.state == "COMPLETED", _stdout(job)
    job.refresh_from_db()
    job.nodes, job.state = done.nodes, done.state  # as the mirror would (it does not run here)
    job.save(update_fields=["nodes", "state"])
    assert dataset_staging.record_staging(job.pk)
    return job


def _scontrol_show_job(job_id: int) -> str:
    root = settings.DEVCLUSTER_DIR / "root"
    return subprocess.run(
        ["chroot", str(root), "scontrol", "show", "job", str(job_id)], capture_output=True, text=True, check=False
    ).stdout


def test_a_job_reads_its_dataset_at_data_and_the_next_one_lands_warm_on_that_node(
    alice, bob, provision, slurm, tus_for, api_client_for, eager_tasks
):
    from datasets import actions

    provision(alice)
    subscribe(bob, "enterprise")  # four A100s at once
    provision(bob)
    # As the beat's sweep would: features an earlier database left on the nodes go (version ids of
    # a fresh test database start at 1 again, and a stale ds_1 elsewhere would be preferred too).
    sync_all_node_features()
    dataset = actions.create_dataset(alice, name=f"corpus-{secrets.token_hex(3)}")
    files = {"train/part-0.bin": os.urandom(12 * 1024 * 1024), "train/part-1.bin": os.urandom(3000), "README": b"hi\n"}
    version = _ready_version(tus_for, alice, dataset, files)
    client = api_client_for(alice)
    command = f'python3 -c "$MANIFEST_SCRIPT" /data/{dataset.name}; touch /data/{dataset.name}/x || echo ro'
    environment = {"MANIFEST_SCRIPT": MANIFEST_SHA}

    # A blocker holds every GPU of the first a100 node, so the first job goes to the other one.
    blocker = _submit(api_client_for(bob), command="sleep 300", gpu_count=4, name="blocker")
    blocked_node = wait_for_state(rest_client(), blocker.slurm_job_id, {"RUNNING"}).nodes
    first = _submit(client, command=command, environment=environment, datasets=[version.pk])
    first = _finished(first)
    output = _stdout(first)
    assert f"manifest-sha256 {version.sha256}" in output, output
    assert "ro" in output.split("[gpupool] ---- job output ----")[1]
    assert first.nodes != blocked_node
    cold = JobDataset.objects.get(job=first)
    assert (cold.warmth, cold.node, cold.copied_bytes) == ("cold", first.nodes, version.size_bytes)
    assert NodeCopy.objects.filter(node=first.nodes, version=version).exists()
    features = _scontrol_show_node_features(first.nodes)
    assert feature_for(version.pk) in features, features

    # The blocker gone, the first node is free again and first in Slurm's order; the second job
    # still goes where its data is, and finds it warm.
    rest_client(bob.profile.cluster_username).cancel_job(blocker.slurm_job_id)
    wait_for_state(rest_client(), blocker.slurm_job_id, {"CANCELLED"})
    second = _submit(client, command=command, environment=environment, datasets=[version.pk])
    shown = _scontrol_show_job(second.slurm_job_id)
    second = _finished(second)
    # Pending, Slurm shows the soft preference as Prefer=; once a node that has it was chosen,
    # as Features= (seen on 24.11 when the job started before scontrol looked).
    wanted = feature_for(version.pk)
    assert f"Prefer={wanted}" in shown or f"Features={wanted}" in shown, shown
    assert second.nodes == first.nodes
    assert f"manifest-sha256 {version.sha256}" in _stdout(second)
    warm = JobDataset.objects.get(job=second)
    assert warm.warmth == "warm" and warm.copied_bytes == 0
    assert warm.staging_seconds < cold.staging_seconds
    print(f"staging: cold {cold.staging_seconds} s, warm {warm.staging_seconds} s ({version.size_bytes} bytes)")

    # Its NVMe: the job asked for the dataset's GB on top of its scratch (gres/nvme).
    assert "gres/nvme:1" in second.tres_per_node


def _scontrol_show_node_features(node: str) -> str:
    root = settings.DEVCLUSTER_DIR / "root"
    shown = subprocess.run(
        ["chroot", str(root), "scontrol", "-o", "show", "node", node], capture_output=True, text=True, check=False
    ).stdout
    return next((part for part in shown.split() if part.startswith("ActiveFeatures=")), "")


def test_the_node_tool_stages_nothing_for_another_users_grant(
    alice, bob, provision, slurm, tus_for, api_client_for, eager_tasks
):
    """bob runs the tool himself, on a node, naming alice's job: refused, nothing staged for him."""
    from datasets import actions

    alices_profile = provision(alice)
    bobs_profile = provision(bob)
    bob_account = bobs_profile.cluster_username
    dataset = actions.create_dataset(alice, name=f"private-{secrets.token_hex(3)}")
    version = _ready_version(tus_for, alice, dataset, {"secret.txt": b"alice only\n"})
    alices = _submit(api_client_for(alice), command="sleep 60", datasets=[version.pk])
    output = _stage_by_hand(bobs_profile, alices.uuid, "gres/gpu:a100:1")
    assert "rc=1" in output and f"is not {bob_account}'s" in output, output
    assert "GPUPOOL_DATASET_VIEW" not in output
    # alice herself, by hand, with her running job's grant but no NVMe: the data is not hers to
    # use unbilled (the portal's jobs hold its GB as gres/nvme).
    output = _stage_by_hand(alices_profile, alices.uuid, "gres/gpu:a100:1")
    assert "rc=1" in output and "holds 0 GB of gres/nvme" in output, output
    assert "GPUPOOL_DATASET_VIEW" not in output
    rest_client(alice.profile.cluster_username).cancel_job(alices.slurm_job_id)


def _stage_by_hand(profile, job_uuid, tres_per_node: str) -> str:
    """A job submitted straight to Slurm (not through the portal) that runs the node tool with
    `job_uuid`'s grant; its output."""
    account = profile.cluster_username
    directory = job_paths().job_dir(account) / f"raw-{secrets.token_hex(3)}"
    local = job_paths().to_local(
        protocol.make_user_directory(account, directory.name, profile.cluster_uid, profile.cluster_gid)
    )
    script = f"#!/bin/bash\nsudo -n /usr/local/sbin/gpupool-dataset-cache stage {job_uuid} $SLURM_JOB_ID\necho rc=$?\n"
    job_id = rest_client(account).submit_job(
        JobSubmission(
            name="by-hand",
            script=script,
            working_directory=str(directory),
            standard_output=f"{directory}/out.log",
            standard_error=f"{directory}/out.log",
            account=settings.SLURM_ACCOUNT,
            partition=settings.SLURM_PARTITION,
            tres_per_node=tres_per_node,
        )
    )
    wait_for_state(rest_client(), job_id, {"COMPLETED", "FAILED"})
    return wait_for(lambda: (local / "out.log").exists() and (local / "out.log").read_text(), what="its output")


@pytest.fixture
def small_cache():
    """The nodes' caches cut to 10 MB (the tool's CAPACITY_BYTES), as they were after the test."""
    conf = settings.DEVCLUSTER_DIR / "root" / "etc/gpupool/dataset-cache.conf"
    before = conf.read_text()
    conf.write_text(before + "CAPACITY_BYTES=10000000\n")
    yield
    conf.write_text(before)


def test_a_full_cache_evicts_the_least_recently_used_copy_but_never_one_a_running_job_mounts(
    alice, provision, slurm, tus_for, api_client_for, eager_tasks, small_cache
):
    from datasets import actions

    versions = {}
    for name in ("xs", "ys"):
        dataset = actions.create_dataset(alice, name=f"{name}-{secrets.token_hex(3)}")
        versions[name] = _ready_version(tus_for, alice, dataset, {"blob.bin": os.urandom(6 * 1000 * 1000)})
    x, y = versions["xs"], versions["ys"]
    subscribe(alice, "enterprise")  # the one H100 node: every job lands on the same cache
    provision(alice)
    client = api_client_for(alice)

    def run(version, command="true") -> Job:
        return _submit(client, gpu_type="h100", command=command, datasets=[version.pk])

    first = _finished(run(x))
    node = first.nodes
    assert JobDataset.objects.get(job=first).warmth == "cold"
    second = _finished(run(y))  # no room for both: x, least recently used, goes
    assert f"GPUPOOL_DATASET_EVICTED {x.sha256} {x.size_bytes}" in _stdout(second)
    assert not NodeCopy.objects.filter(node=node, version=x).exists()
    assert NodeCopy.objects.filter(node=node, version=y).exists()
    assert feature_for(x.pk) not in _scontrol_show_node_features(node)
    assert feature_for(y.pk) in _scontrol_show_node_features(node)

    # x again, held by a running job: y is evicted for it, and a job on y then finds no room.
    holder = run(x, command="sleep 60")
    wait_for(lambda: "GPUPOOL_DATASET_VIEW" in _stdout(holder), what="the holder's staging")
    blocked = run(y)
    done = wait_for_state(rest_client(), blocked.slurm_job_id, {"COMPLETED", "FAILED"})
    assert done.state == "FAILED"
    stderr = (job_paths().to_local(protocol.job_directory(blocked)) / "stderr.log").read_text()
    assert "no room in this node's cache" in stderr, stderr
    rest_client(alice.profile.cluster_username).cancel_job(holder.slurm_job_id)


def _pin_and_wait(admin, version, node: str):
    pins = dataset_pins.pin_version(admin, version, [node])
    assert [pin.node for pin in pins] == [node]
    job = dataset_pins.staging_job(version, node)
    assert job is not None and job.slurm_job_id, job and job.error
    done = wait_for_state(rest_client(), job.slurm_job_id, {"COMPLETED", "FAILED"}, timeout=120)
    local = job_paths().to_local(protocol.job_directory(job)) / "stdout.log"
    assert done.state == "COMPLETED", local.read_text() if local.exists() else ""
    job.refresh_from_db()
    job.nodes, job.state = done.nodes, done.state  # as the mirror would
    job.save(update_fields=["nodes", "state"])
    assert dataset_staging.record_staging(job.pk)
    return job, local.read_text()


def test_a_pin_stages_ahead_blocks_eviction_until_unpinned_and_a_rotten_warm_copy_is_fetched_again(
    alice, admin_user, provision, slurm, tus_for, api_client_for, eager_tasks, small_cache
):
    from datasets import actions

    provision(admin_user)
    subscribe(alice, "enterprise")  # the one H100 node: every job of hers lands on the one cache
    provision(alice)
    mirror_nodes(rest_client())
    sync_all_node_features()
    node = Node.objects.filter(name__contains="h100").values_list("name", flat=True).get()
    versions = {}
    for name in ("kept", "other"):
        dataset = actions.create_dataset(alice, name=f"{name}-{secrets.token_hex(3)}")
        versions[name] = _ready_version(tus_for, alice, dataset, {"blob.bin": os.urandom(6 * 1000 * 1000)})
    kept, other = versions["kept"], versions["other"]

    # Pinned: copied by the admin's staging job before any of alice's jobs ran.
    staging, output = _pin_and_wait(admin_user, kept, node)
    assert f"GPUPOOL_DATASET_READY {kept.pk} cold" in output, output
    assert NodeCopy.objects.filter(node=node, version=kept).exists()
    pins = settings.DATASET_STORE / "pins" / node
    assert kept.sha256 in pins.read_text()
    assert "gres/nvme:1" in staging.tres_per_node and staging.owner == admin_user
    client = api_client_for(alice)
    first = _finished(_submit(client, gpu_type="h100", command="true", datasets=[kept.pk]))
    assert JobDataset.objects.get(job=first).warmth == "warm"

    # The 10 MB cache holds the pinned 6 MB: a job on another 6 MB version finds no room.
    blocked = _submit(client, gpu_type="h100", command="true", datasets=[other.pk])
    assert wait_for_state(rest_client(), blocked.slurm_job_id, {"COMPLETED", "FAILED"}).state == "FAILED"
    stderr = (job_paths().to_local(protocol.job_directory(blocked)) / "stderr.log").read_text()
    assert "held by running jobs or pinned" in stderr, stderr

    # Unpinned: the copy may go, and does.
    assert dataset_pins.unpin(admin_user, kept, node)
    assert kept.sha256 not in pins.read_text()
    command = f'python3 -c "$MANIFEST_SCRIPT" /data/{other.dataset.name}'
    environment = {"MANIFEST_SCRIPT": MANIFEST_SHA}
    second = _finished(_submit(client, gpu_type="h100", command=command, environment=environment, datasets=[other.pk]))
    assert f"GPUPOOL_DATASET_EVICTED {kept.sha256}" in _stdout(second)
    assert not NodeCopy.objects.filter(node=node, version=kept).exists()

    # A bit flipped in the warm copy (same size), its last full check two days old: the next job
    # checks it, removes it and copies it again, and reads the true bytes.
    cache = settings.DEVCLUSTER_DIR / "root" / "var/cache/gpupool/datasets" / node
    blob = cache / f"c{other.sha256}" / "blob.bin"
    blob.chmod(0o644)
    with blob.open("r+b") as handle:
        first_byte = handle.read(1)
        handle.seek(0)
        handle.write(bytes([first_byte[0] ^ 0xFF]))
    old = time.time() - 2 * 86400
    os.utime(cache / f"c{other.sha256}.checked", (old, old))
    third = _finished(_submit(client, gpu_type="h100", command=command, environment=environment, datasets=[other.pk]))
    output = _stdout(third)
    assert f"GPUPOOL_DATASET_CORRUPT {other.pk}" in output, output
    assert f"manifest-sha256 {other.sha256}" in output, output
    assert JobDataset.objects.get(job=third).warmth == "cold"
