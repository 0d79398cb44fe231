"""The second cluster in Debian's Chromium, all there: the landing page counts both clusters' GPUs
as the heatmap shows them, a further cluster's heatmap cell opens that cluster's GPU page with its
telemetry drawn (never the own cluster's GPU of the same node name and index), its node page says
its state in words, an unknown cluster is a 404, and a clone of a job there keeps the cluster.
The real web process, with a CLUSTERS_FILE naming site-b; no Slurm is asked."""

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from cluster.clusters.registry import ClusterConfig
from cluster.models import FurtherNode, Node
from jobs.models import Job
from jobs.tests.conftest import GOOD_SPEC
from telemetry.actions.storage import store_samples
from telemetry.samples import GpuSample
from testing.browser import chromium_page, log_in
from testing.servers import portal_stack

playwright_api = pytest.importorskip("playwright.sync_api")
expect = playwright_api.expect

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
OTHER = "site-b"
LAYOUT = [("gpu-4090-01", "rtx4090", 4), ("gpu-4090-02", "rtx4090", 4), ("gpu-a100-01", "a100", 4)]
LAYOUT += [("gpu-a100-02", "a100", 4), ("gpu-h100-01", "h100", 2)]


def _sample(cluster, index, compute):
    return GpuSample(
        time=datetime.now(UTC),
        node="gpu-a100-01",
        index=index,
        uuid=f"GPU-{cluster or 'own'}-{index}",
        compute_util=compute,
        memory_util=20.0,
        memory_used_mb=8000,
        memory_total_mb=40960,
        temperature_c=50.0,
        power_w=200.0,
        cluster=cluster,
    )


def _clusters_file(tmp_path: Path) -> Path:
    entry = {
        "name": OTHER,
        "slurmrestd_url": "http://127.0.0.1:9",
        "jwt_key_file": str(tmp_path / "site-b.jwt.key"),
        "job_root": "/srv/gpupool/jobs",
        "job_root_local": str(tmp_path / "site-b-jobs"),
    }
    path = tmp_path / "clusters.json"
    path.write_text(json.dumps([entry]))
    return path


def test_a_further_clusters_gpus_are_counted_linked_and_drawn(alice, tmp_path, settings):
    settings.EXTRA_CLUSTERS = (
        ClusterConfig(
            name=OTHER,
            slurmrestd_url="http://127.0.0.1:9",
            jwt_key_file=tmp_path / "site-b.jwt.key",
            cli_prefix=(),
            job_root="/srv/gpupool/jobs",
            job_root_local=tmp_path / "site-b-jobs",
        ),
    )
    now = datetime.now(UTC)
    for name, gpu_type, count in LAYOUT:
        gpus = [{"type": gpu_type, "count": count, "used_indexes": []}]
        Node.objects.create(name=name, state="IDLE", gpus=gpus)
        there = {"state": "IDLE", "state_flags": "", "gpus": gpus}
        if name == "gpu-a100-01":
            there = {"state": "MIXED", "state_flags": "DRAIN", "gpus": [{**gpus[0], "used_indexes": [1]}]}
        FurtherNode.objects.create(cluster=OTHER, name=name, seen_at=now, **there)
    store_samples([_sample("", 1, 7.0), _sample(OTHER, 1, 93.0)], source="nvml")
    there_job = Job.objects.create(
        owner=alice, cluster=OTHER, placement="You chose site-b.", name="there", state="COMPLETED", spec=GOOD_SPEC
    )

    env = {"CLUSTERS_FILE": str(_clusters_file(tmp_path))}
    with chromium_page(playwright_api, width=1280, height=900) as page, portal_stack(extra_env=env) as base_url:
        errors = []
        page.on("pageerror", lambda error: errors.append(error))
        page.goto(f"{base_url}/")
        a100 = page.locator("[data-gpu-type=a100]")
        expect(a100).to_contain_text("12 of 16 free now")
        expect(a100.locator(f"[data-gpu-clusters] [data-cluster={OTHER}]")).to_have_text("4 of 8 on site-b")

        log_in(page, base_url, "alice", "pw-alice")
        page.goto(f"{base_url}/console/heatmap/")
        expect(page.locator(".hm-cell")).to_have_count(36)  # the landing page's 16 a100s among them
        node = page.locator(f"section.hm-type[data-cluster={OTHER}] .hm-node[data-node=gpu-a100-01]")
        state = node.locator(".hm-node-state")
        expect(state).to_have_text("partly in use, draining")
        expect(state).to_have_attribute("title", "Slurm: MIXED+DRAIN")
        cell = node.locator('.hm-cell[data-g="1"]')
        cell.hover()
        expect(page.locator("#heatmap-tip")).to_contain_text("site-b · gpu-a100-01 · GPU 1")
        expect(page.locator("#heatmap-tip")).to_contain_text("Compute: 93%")
        cell.click()
        page.wait_for_url(f"{base_url}/console/nodes/gpu-a100-01/gpus/1/?cluster={OTHER}")
        expect(page.locator("[data-gpu-cluster]")).to_have_text(OTHER)
        expect(page.locator("main, body").first).to_contain_text("GPU-site-b-1")
        page.wait_for_selector("#chart-hour .main-svg", timeout=15000)
        expect(page.locator("#chart-hour")).to_have_attribute("data-points", "1")
        compute = page.evaluate("() => document.getElementById('chart-hour').data[0].y")
        assert compute == [93.0]  # site-b's GPU, not the portal's own gpu-a100-01 GPU 1 (7 %)

        page.locator("h1 a").click()
        page.wait_for_url(f"{base_url}/console/nodes/gpu-a100-01/?cluster={OTHER}")
        expect(page.locator("[data-node-cluster]")).to_contain_text(OTHER)
        expect(page.locator("span[data-node-state]")).to_have_text("partly in use, draining")
        expect(page.locator("table").first).to_contain_text("93%")

        # The heatmap's node name goes to the same page.
        page.goto(f"{base_url}/console/heatmap/")
        page.locator(f"section.hm-type[data-cluster={OTHER}] .hm-node[data-node=gpu-a100-02] .hm-node-name").click()
        page.wait_for_url(f"{base_url}/console/nodes/gpu-a100-02/?cluster={OTHER}")
        assert page.goto(f"{base_url}/console/nodes/gpu-a100-01/?cluster=site-c").status == 404

        page.goto(f"{base_url}/jobs/new/?clone={there_job.pk}")
        expect(page.locator("#id_cluster")).to_have_value(OTHER)
        page.screenshot(path=str(tmp_path / "clone-site-b.png"), full_page=True)
        assert errors == []
