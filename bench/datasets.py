"""Datasets, measured on the real dev cluster in one run (docs/datasets.md quotes the figures):

1. Upload throughput: one file of --upload-mb MB sent with the CLI (scripts/gpupool-dataset-upload:
   tus, 8 MiB chunks, each with its sha256) to the web process, on one connection and as --parallel parts
   at once (tus concatenation, the CLI's default for a large file), against `cp` of the same file
   to the store's filesystem. Goal: upload >= 0.5x cp. The worker's check after the commit is
   shown apart (it reads every byte once more).
2. Time to the first byte in a job: a job on that version on a cold node (copied to the node's
   NVMe, checked, then mounted) and again on the warm node: the node tool's staging seconds, and
   from the batch script's start (Slurm's start time, 1 s resolution) to the first byte read
   inside the container.
3. Cache hit rate of a replayed sequence of --jobs jobs over --datasets small datasets (two
   users, each with half of them, a seeded skewed draw; each user keeps two jobs of 2 A100s in
   flight, so both A100 nodes fill and jobs spread), with caches cut to hold 3 copies each: with
   data-aware placement (--prefer) and without (DATASET_PLACEMENT off).

    .venv/bin/python bench/datasets.py [--upload-mb 1024] [--jobs 32] [--datasets 6] [--upload-only]

Changes the dev cluster's node tool configuration (CAPACITY_BYTES) for part 3 and restores it;
empties the A100 nodes' caches before each placement mode.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import os
import random
import shutil
import tempfile
import time
from pathlib import Path

from _common import BASE_DIR, bench_database, make_user, options, retire_user

GOOD = {
    "name": "bench",
    "image": "nvcr.io/nvidia/pytorch:24.05-py3",
    "gpu_type": "a100",
    "gpu_count": 1,
    "time_limit_minutes": 10,
}


def _root() -> Path:
    from django.conf import settings

    return settings.DEVCLUSTER_DIR / "root"


def _cli():
    """scripts/gpupool-dataset-upload as a module: the bench times its own steps."""
    loader = importlib.machinery.SourceFileLoader(
        "gpupool_upload_cli", str(BASE_DIR / "scripts/gpupool-dataset-upload")
    )
    module = importlib.util.module_from_spec(importlib.util.spec_from_loader(loader.name, loader))
    loader.exec_module(module)
    return module


def upload_against_cp(base_url: str, token: str, dataset_id: int, megabytes: int, parallel: int) -> dict[str, float]:
    """Seconds of: cp, the CLI's checksum pass, the transfer on one connection (every PATCH) and
    as `parallel` parts at once (joined on the server), commit to ready."""
    from django.conf import settings

    cli = _cli()
    store = Path(settings.DATASET_STORE)
    figures = {}
    with tempfile.TemporaryDirectory(dir=store.parent) as scratch:
        folder = Path(scratch) / "upload"
        folder.mkdir()
        source = folder / "shard.bin"
        with open(source, "wb") as out:
            for _ in range(megabytes):
                out.write(os.urandom(1000 * 1000))
        os.sync()
        started = time.perf_counter()
        shutil.copyfile(source, Path(scratch) / "copy.bin")
        os.sync()
        figures["cp"] = time.perf_counter() - started

        portal = cli.Portal(base_url, token)
        started = time.perf_counter()
        [(relative, path, size, digest)] = cli.files_of(folder)
        figures["checksums"] = time.perf_counter() - started
        for connections in (1, parallel):
            opened = portal.json("POST", f"/api/v1/datasets/{dataset_id}/versions/")
            version_url = f"/api/v1/datasets/{dataset_id}/versions/{opened['number']}/"
            quiet = cli.Progress(size)
            quiet.add = lambda count, sent=True: None  # the figures are printed at the end
            started = time.perf_counter()
            if connections > 1:
                cli.send_in_parts(portal, version_url, (relative, path, size, digest), {}, quiet, connections)
            else:
                _status, headers, _body = portal.request(
                    "POST",
                    f"{version_url}uploads/",
                    b"",
                    {"Upload-Length": str(size), "Upload-Metadata": cli.metadata(path=relative, sha256=digest)},
                )
                cli.send(portal, headers["Location"], path, size, quiet)
            figures[f"transfer {connections}"] = time.perf_counter() - started
            started = time.perf_counter()
            portal.json("POST", f"{version_url}commit")
            while (state := portal.json("GET", version_url)["state"]) not in ("ready", "failed"):
                time.sleep(0.1)
            assert state == "ready", state
            figures["ready"] = time.perf_counter() - started
    return figures


def run_job(client, **changes):
    """Submit through the API (inline to Slurm), wait for the end, read the staging lines."""
    from cluster.clusters.services import rest_client
    from jobs import dataset_staging
    from jobs.models import Job, JobDataset
    from testing.slurm import wait_for_state

    answer = client.post("/api/v1/jobs/", {**GOOD, **changes}, format="json")
    if answer.status_code != 201:
        raise SystemExit(f"submission refused: {answer.content!r}")
    job = Job.objects.get(pk=answer.json()["id"])
    if not job.slurm_job_id:
        raise SystemExit(f"not submitted: {job.error}")
    return job, lambda: _finish(job, rest_client, wait_for_state, dataset_staging, JobDataset)


def _finish(job, rest_client, wait_for_state, dataset_staging, JobDataset):
    done = wait_for_state(rest_client(), job.slurm_job_id, {"COMPLETED", "FAILED", "CANCELLED"}, timeout=600)
    job.refresh_from_db()
    job.nodes, job.state, job.start_time = done.nodes, done.state, done.start_time
    job.save(update_fields=["nodes", "state", "start_time"])
    dataset_staging.record_staging(job.pk)
    return job, list(JobDataset.objects.filter(job=job))


def first_byte(job) -> float | None:
    from cluster.clusters.services import job_paths
    from jobs import protocol

    text = (job_paths().to_local(protocol.job_directory(job)) / "stdout.log").read_text()
    for line in text.splitlines():
        if line.startswith("first-byte-at "):
            return float(line.split()[1]) - job.start_time.timestamp()
    return None


def clear_caches(nodes: list[str]) -> None:
    from datasets.actions.node_cache import sync_all_node_features
    from datasets.models import NodeCopy

    for node in nodes:
        shutil.rmtree(_root() / "var/cache/gpupool/datasets" / node, ignore_errors=True)
    NodeCopy.objects.filter(node__in=nodes).delete()
    sync_all_node_features()


def replay(clients, versions, sequence, *, placement: bool) -> tuple[int, int, dict[str, int]]:
    """(warm starts, jobs, jobs per node). Each user keeps two jobs of 2 A100s in flight (their
    plan's four A100s), so the two users fill both A100 nodes and jobs spread between them."""
    from django.conf import settings

    settings.DATASET_PLACEMENT = placement
    warm, per_node = 0, {}
    in_flight: dict[int, list] = {user: [] for user in clients}

    def finish_one(user):
        nonlocal warm
        done, mounts = in_flight[user].pop(0)()
        warm += sum(mount.warmth == "warm" for mount in mounts)
        per_node[done.nodes] = per_node.get(done.nodes, 0) + 1

    for user, index in sequence:
        if len(in_flight[user]) >= 2:
            finish_one(user)
        _job, finish = run_job(clients[user], command="sleep 3", gpu_count=2, datasets=[versions[user][index].pk])
        in_flight[user].append(finish)
    for user in clients:
        while in_flight[user]:
            finish_one(user)
    return warm, len(sequence), per_node


def enterprise(user):
    """The plan of four A100s at once, and the cluster account (after the uploads: Enterprise
    includes no dataset storage)."""
    from decimal import Decimal

    from accounts import actions
    from billing.actions import approve_credit_limit
    from plans.actions import subscriptions
    from plans.models import Plan

    subscriptions.change(user, Plan.objects.get(code="enterprise"))
    approve_credit_limit(user, Decimal("1000000"), actor=None, reason="benchmark account")
    actions.provision(user.profile.pk, preferred_name=f"bench{os.getpid() % 10000}{user.username}"[:30])
    user.profile.refresh_from_db()


def main():
    args = options(
        upload_mb=1024,
        jobs=32,
        datasets=6,
        upload_only=(False, "part 1 alone (needs no cluster)"),
        parallel=(2, "the CLI's connections for the file's parts"),
    )

    from django.conf import settings
    from rest_framework.test import APIClient

    from accounts.models import ApiToken
    from datasets import actions
    from datasets.models import DatasetVersion
    from testing.servers import portal_stack

    settings.SUBMIT_INLINE = True
    store = _root() / "srv/gpupool/datasets"
    settings.DATASET_STORE = store
    with bench_database():
        user = make_user("ds", plan="pro", provision=not args.upload_only)
        replayers = []
        _token, key = ApiToken.issue(user, "bench")
        client = APIClient()
        client.credentials(HTTP_AUTHORIZATION=f"Bearer {key}")
        try:
            big = actions.create_dataset(user, name="big")
            with portal_stack(worker=True, extra_env={"DATASET_STORE": str(store)}) as base_url:
                figures = upload_against_cp(base_url, key, big.pk, args.upload_mb, args.parallel)
            mb = args.upload_mb
            cp_s, one_s, many_s = figures["cp"], figures["transfer 1"], figures[f"transfer {args.parallel}"]
            print(
                f"upload {mb} MB: cp {cp_s:.2f} s ({mb / cp_s:.0f} MB/s); tus upload on one connection {one_s:.2f} s "
                f"({mb / one_s:.0f} MB/s, {cp_s / one_s:.2f}x cp), as {args.parallel} parts at once {many_s:.2f} s "
                f"({mb / many_s:.0f} MB/s); RATIO upload/cp throughput = {cp_s / many_s:.2f} (goal >= 0.5); "
                f"with the client's checksum pass first ({figures['checksums']:.2f} s): "
                f"{cp_s / (many_s + figures['checksums']):.2f}; commit to ready (the worker's check) "
                f"{figures['ready']:.2f} s"
            )

            if args.upload_only:
                return
            version = DatasetVersion.objects.filter(dataset=big).order_by("-number").first()
            clear_caches(["gpu-a100-01", "gpu-a100-02"])
            read = (
                "python3 -c \"import time; open('/data/big/shard.bin','rb').read(1); "
                "print('first-byte-at', time.time())\""
            )
            rows = []
            for label in ("cold", "warm"):
                job, finish = run_job(client, command=read, datasets=[version.pk])
                done, mounts = finish()
                rows.append((label, done.nodes, mounts[0].warmth, mounts[0].staging_seconds, first_byte(done)))
            for label, node, warmth, staging, ttfb in rows:
                print(
                    f"first byte {label}: node {node} ({warmth}), staging {staging} s, "
                    f"batch start to first byte {ttfb:.2f} s (Slurm's start has 1 s resolution)"
                )

            # 3: a skewed replay over small datasets (each user its own), caches holding 3 copies.
            clients, versions = {}, {}
            for user_index in (0, 1):
                member = make_user(f"r{user_index}", plan="pro", provision=False)
                replayers.append(member)
                versions[user_index] = [
                    _ready(
                        actions.create_dataset(member, name=f"set{number}"), member, {"blob.bin": os.urandom(5 * 10**6)}
                    )
                    for number in range(args.datasets // 2)
                ]
                enterprise(member)
                _token, member_key = ApiToken.issue(member, "bench")
                clients[user_index] = APIClient()
                clients[user_index].credentials(HTTP_AUTHORIZATION=f"Bearer {member_key}")
            draw = random.Random(7)
            per_user = args.datasets // 2
            weights = [1 / (rank + 1) for rank in range(per_user)]
            sequence = [
                (draw.randrange(2), draw.choices(range(per_user), weights=weights)[0]) for _ in range(args.jobs)
            ]
            conf = _root() / "etc/gpupool/dataset-cache.conf"
            before = conf.read_text()
            conf.write_text(before + "CAPACITY_BYTES=16000000\n")
            try:
                results = {}
                for placement in (False, True):
                    clear_caches(["gpu-a100-01", "gpu-a100-02"])
                    started = time.perf_counter()
                    warm, jobs, per_node = replay(clients, versions, sequence, placement=placement)
                    results[placement] = (warm, jobs, per_node, time.perf_counter() - started)
            finally:
                conf.write_text(before)
            for placement, (warm, jobs, per_node, seconds) in results.items():
                label = "with placement   " if placement else "without placement"
                print(
                    f"replay {label}: {warm}/{jobs} warm = {warm / jobs:.0%} hit rate, jobs per node {per_node}, "
                    f"{seconds:.0f} s"
                )
            print(f"sequence (user, dataset): {sequence}; skew 1/rank; per-node cache: 3 copies of 5 MB")
        finally:
            settings.DATASET_PLACEMENT = True
            for someone in [user, *replayers]:
                retire_user(someone)


def _ready(dataset, user, files: dict[str, bytes]):
    """A ready version through the actions and the worker's check, as an upload makes it."""
    import io

    from datasets import actions
    from datasets.models import DatasetVersion
    from datasets.tasks import verify_version

    version = actions.open_version(dataset, user)
    for path, data in files.items():
        upload = actions.create_upload(version, user, path=path, length=len(data))
        actions.receive_chunk(upload, user, offset=0, stream=io.BytesIO(data))
    actions.commit_version(version, user)
    verify_version(version.pk)
    return DatasetVersion.objects.get(pk=version.pk)


if __name__ == "__main__":
    main()
