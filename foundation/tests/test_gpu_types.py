"""GPU types defined once: the file's checks, settings read at start-up, and the dev cluster
generated from the same file (slurm.conf nodes, gres.conf, typed TRES, job_submit.lua)."""

import copy
import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from foundation.gpu_types import (
    DEFAULT_GPU_TYPES_FILE,
    GpuType,
    gpu_types_from_mapping,
    load_gpu_types,
    parse_gpu_types,
)

REPO = Path(__file__).resolve().parents[2]
DEVCLUSTER = REPO / "deploy" / "devcluster"

# A layout unlike the project's: a new type, an order of its own, a type without dev nodes.
OTHER = {
    "gpu_types": {
        "l40s": {
            "label": "NVIDIA L40S",
            "memory_gb": 48,
            "shards_per_gpu": 12,
            "per_node": 8,
            "power_w": {"idle": 35, "max": 350},
        },
        "a100": {"label": "NVIDIA A100 80GB", "memory_gb": 80, "shards_per_gpu": 20, "per_node": 4},
        "mi300x": {"label": "AMD Instinct MI300X", "memory_gb": 192, "shards_per_gpu": 48, "per_node": 8},
    },
    "dev_nodes": [
        {"name": "gpu-l40s-01", "gpu_type": "l40s", "gpus": 2},
        {"name": "gpu-a100-07", "gpu_type": "a100", "gpus": 3, "nvme_gb": 1800},
    ],
}


def _write(tmp_path, doc, name="gpu_types.json") -> Path:
    path = tmp_path / name
    path.write_text(doc if isinstance(doc, str) else json.dumps(doc))
    return path


def _gpu_layout():
    """deploy/devcluster/gpu_layout.py, by path (it is a script, not a package)."""
    spec = importlib.util.spec_from_file_location("devcluster_gpu_layout", DEVCLUSTER / "gpu_layout.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# --- the file and the loader ---------------------------------------------------------------


def test_settings_hold_the_projects_file():
    catalog = load_gpu_types(DEFAULT_GPU_TYPES_FILE)
    assert Path(settings.GPU_TYPES_FILE) == DEFAULT_GPU_TYPES_FILE
    assert settings.GPU_TYPES == catalog.settings_dict()
    assert list(settings.GPU_TYPES) == list(catalog.types)
    # Every dev node's type is a type of the pool, and no node has more GPUs than per_node says.
    assert catalog.dev_nodes
    assert all(node.gpus <= catalog.types[node.gpu_type].per_node for node in catalog.dev_nodes)


def test_a_file_loads_into_frozen_types_in_its_order(tmp_path):
    catalog = load_gpu_types(_write(tmp_path, OTHER))
    assert list(catalog.types) == ["l40s", "a100", "mi300x"]
    l40s = catalog.types["l40s"]
    assert l40s == GpuType("l40s", 48, 8, 12, label="NVIDIA L40S", idle_w=35, max_w=350)
    assert (l40s.shard_gb, l40s.shards_for(48), l40s.shards_for(5)) == (4, 12, 2)
    assert catalog.types["a100"].idle_w is None
    assert [(n.name, n.gpu_type, n.gpus) for n in catalog.dev_nodes] == [
        ("gpu-l40s-01", "l40s", 2),
        ("gpu-a100-07", "a100", 3),
    ]
    with pytest.raises(AttributeError):
        l40s.memory_gb = 1
    with pytest.raises(TypeError):
        catalog.types["h100"] = l40s
    # The settings form reads back to the same types (SpecPolicy reads settings.GPU_TYPES so).
    assert dict(gpu_types_from_mapping(catalog.settings_dict())) == dict(catalog.types)


def _broken(change):
    doc = copy.deepcopy(OTHER)
    change(doc)
    return doc


def _set(path, value):
    def change(doc):
        target = doc
        for key in path[:-1]:
            target = target[key]
        target[path[-1]] = value

    return change


def _drop(path):
    def change(doc):
        target = doc
        for key in path[:-1]:
            target = target[key]
        del target[path[-1]]

    return change


@pytest.mark.parametrize(
    "change, message",
    [
        (_drop(("gpu_types",)), "gpu_types is missing"),
        (_set(("gpu_types",), {}), "gpu_types must be a non-empty object"),
        (_set(("gpu_type",), {}), "unknown key gpu_type"),
        (_set(("gpu_types", "A100"), OTHER["gpu_types"]["a100"]), "'A100' is not a GPU type name"),
        # "gpu:4090" would read as a count of 4090 GPUs in Slurm.
        (_set(("gpu_types", "4090"), OTHER["gpu_types"]["a100"]), "'4090' is not a GPU type name"),
        (_drop(("gpu_types", "a100", "label")), "gpu_types.a100 needs label"),
        (_drop(("gpu_types", "a100", "per_node")), "gpu_types.a100 needs per_node"),
        (_set(("gpu_types", "a100", "label"), 'A100"; rm'), "gpu_types.a100.label must be a plain name"),
        (_set(("gpu_types", "a100", "memory_gb"), "80"), "gpu_types.a100.memory_gb must be a positive whole number"),
        (_set(("gpu_types", "a100", "memory_gb"), 80.0), "gpu_types.a100.memory_gb must be a positive whole number"),
        (_set(("gpu_types", "a100", "per_node"), True), "gpu_types.a100.per_node must be a positive whole number"),
        (_set(("gpu_types", "a100", "shards_per_gpu"), 0), "gpu_types.a100.shards_per_gpu must be a positive"),
        (_set(("gpu_types", "a100", "shards_per_gpu"), 81), "shards_per_gpu (81) is more than memory_gb (80)"),
        (_set(("gpu_types", "a100", "memroy_gb"), 80), "unknown key gpu_types.a100.memroy_gb"),
        (_set(("gpu_types", "l40s", "power_w"), {"idle": 350, "max": 35}), "0 <= idle < max"),
        (_set(("gpu_types", "l40s", "power_w"), {"idle": 35}), "gpu_types.l40s.power_w must be"),
        (_set(("gpu_types", "l40s"), 48), "gpu_types.l40s must be an object"),
        (_set(("dev_nodes",), {"gpu-l40s-01": "l40s"}), "dev_nodes must be a list"),
        (_set(("dev_nodes", 1, "gpu_type"), "h100"), "dev_nodes[1].gpu_type 'h100' is not in gpu_types"),
        (_set(("dev_nodes", 1, "name"), "gpu-l40s-01"), "dev_nodes[1].name 'gpu-l40s-01' appears twice"),
        (_set(("dev_nodes", 0, "name"), "GPU_1"), "dev_nodes[0].name 'GPU_1' is not a node name"),
        (_set(("dev_nodes", 0, "gpus"), 9), "dev_nodes[0].gpus (9) is more than gpu_types.l40s.per_node (8)"),
        (_drop(("dev_nodes", 0, "gpus")), "dev_nodes[0] needs gpus"),
    ],
)
def test_a_bad_file_is_refused_naming_the_file_and_the_key(tmp_path, change, message):
    path = _write(tmp_path, _broken(change))
    with pytest.raises(ImproperlyConfigured) as refused:
        load_gpu_types(path)
    assert message in str(refused.value)
    assert str(path) in str(refused.value)


def test_a_file_that_is_missing_or_not_json_is_refused(tmp_path):
    with pytest.raises(ImproperlyConfigured, match="cannot be read"):
        load_gpu_types(tmp_path / "absent.json")
    with pytest.raises(ImproperlyConfigured, match="not JSON .* at line 2"):
        load_gpu_types(_write(tmp_path, '{"gpu_types":\n {a100: 1}}'))
    with pytest.raises(ImproperlyConfigured, match="must hold a JSON object"):
        parse_gpu_types([OTHER], source="x.json")


def _settings_in_a_fresh_process(**env) -> subprocess.CompletedProcess:
    """Import the settings as a starting process would, with `env` on top of a clean environment."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith("GPU_TYPES")}
    return subprocess.run(
        [
            sys.executable,
            "-c",
            "import json, django; from django.conf import settings; django.setup(); "
            "print(json.dumps(settings.GPU_TYPES))",
        ],
        cwd=REPO,
        env={**clean, "DJANGO_SETTINGS_MODULE": "gpupool.settings", "DEBUG": "1", **env},
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_the_process_starts_with_another_file_and_stops_on_a_bad_one(tmp_path):
    good = _settings_in_a_fresh_process(GPU_TYPES_FILE=str(_write(tmp_path, OTHER)))
    assert good.returncode == 0, good.stderr
    assert (
        json.loads(good.stdout.strip().splitlines()[-1]) == load_gpu_types(tmp_path / "gpu_types.json").settings_dict()
    )

    bad = _write(tmp_path, _broken(_set(("gpu_types", "a100", "memory_gb"), 0)), "bad.json")
    stopped = _settings_in_a_fresh_process(GPU_TYPES_FILE=str(bad))
    assert stopped.returncode != 0
    assert "GpuTypesError: GPU types (" in stopped.stderr  # an ImproperlyConfigured
    assert "gpu_types.a100.memory_gb must be a positive whole number" in stopped.stderr

    # The old JSON setting is refused, never silently ignored.
    old = _settings_in_a_fresh_process(GPU_TYPES_JSON='{"a100": {"memory_gb": 40}}')
    assert old.returncode != 0 and "GPU_TYPES_JSON is no longer read" in old.stderr


# --- the dev cluster, generated from the same file ---------------------------------------------


def test_generated_slurm_lines_come_from_the_file(tmp_path):
    layout = _gpu_layout()
    catalog = layout.load(_write(tmp_path, OTHER))
    assert layout.node_lines(catalog, base_port=20000, cpus=8, memory_mb=32000) == [
        "NodeName=gpu-l40s-01 NodeAddr=127.0.0.1 Port=20000 CPUs=8 RealMemory=32000 "
        "Gres=gpu:l40s:2,shard:l40s:24 Features=gpu_type:l40s State=UNKNOWN",
        "NodeName=gpu-a100-07 NodeAddr=127.0.0.1 Port=20001 CPUs=8 RealMemory=32000 "
        "Gres=gpu:a100:3,shard:a100:60,nvme:1800 Features=gpu_type:a100 State=UNKNOWN",
    ]
    gres = layout.gres_conf_lines(catalog)
    assert gres[:2] == [
        "NodeName=gpu-l40s-01 Name=gpu Type=l40s File=/dev/fakegpu/gpu-l40s-01/nvidia0",
        "NodeName=gpu-l40s-01 Name=gpu Type=l40s File=/dev/fakegpu/gpu-l40s-01/nvidia1",
    ]
    assert gres.count("NodeName=gpu-a100-07 Name=shard Type=a100 Count=20 File=/dev/fakegpu/gpu-a100-07/nvidia2") == 1
    # The NVMe cache: count-only, on the node that has one.
    assert gres[-1] == "NodeName=gpu-a100-07 Name=nvme Count=1800 Flags=CountOnly"
    assert len(gres) == 2 * (2 + 3) + 1
    # Every type of the file, also mi300x without dev nodes: a plan may limit it.
    assert layout.accounting_tres(catalog) == (
        "gres/gpu,gres/gpu:l40s,gres/gpu:a100,gres/gpu:mi300x,gres/shard,gres/shard:l40s,gres/shard:a100,gres/shard:mi300x"
        ",gres/nvme"
    )
    lua = layout.job_submit_lua(catalog)
    assert 'local GPU_TYPES = "l40s, a100"' in lua and 'local EXAMPLE_TYPE = "l40s"' in lua
    assert "@" not in lua.split("]]", 1)[1]


def test_a_layout_without_dev_nodes_is_refused_for_the_dev_cluster(tmp_path):
    layout = _gpu_layout()
    doc = {"gpu_types": OTHER["gpu_types"]}
    assert load_gpu_types(_write(tmp_path, doc)).dev_nodes == ()  # a production file needs none
    with pytest.raises(ImproperlyConfigured, match="dev_nodes is empty"):
        layout.load(tmp_path / "gpu_types.json")


def _cluster_shell(gpu_types_file: Path, script: str) -> subprocess.CompletedProcess:
    """Runs `script` after sourcing the dev cluster's libraries as cluster.sh does (no root needed)."""
    prelude = f"""
set -euo pipefail
ROOT=/nonexistent PIDDIR=/nonexistent CLUSTER_NAME=gpupool SLURMCTLD_PORT=16817 SLURMDBD_PORT=16819
SLURMD_BASE_PORT=16901 JWT_KEY=/etc/slurm/jwt_hs256.key NODE_CPUS=16 NODE_MEMORY_MB=64000
PYTHON=/usr/bin/python3 GPU_TYPES_FILE="$1"
source {DEVCLUSTER}/lib/common.sh
source {DEVCLUSTER}/lib/configs.sh
load_gpu_layout
"""
    return subprocess.run(
        ["bash", "-c", prelude + script, "bash", str(gpu_types_file)],
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.mark.skipif(not Path("/usr/bin/python3").exists(), reason="cluster.sh runs the host's /usr/bin/python3")
def test_cluster_scripts_write_slurm_conf_and_gres_conf_from_the_file(tmp_path):
    done = _cluster_shell(
        _write(tmp_path, OTHER),
        'slurm_conf; echo "---"; gres_conf; echo "---"; echo "${NODES[*]}|${NODE_GPU_COUNT[gpu-a100-07]}"',
    )
    assert done.returncode == 0, done.stderr
    slurm_conf, gres_conf, arrays = done.stdout.split("---\n")
    lines = slurm_conf.splitlines()
    assert [line.split()[0] for line in lines if line.startswith("NodeName=")] == [
        "NodeName=gpu-l40s-01",
        "NodeName=gpu-a100-07",
    ]
    assert "Gres=gpu:l40s:2,shard:l40s:24 Features=gpu_type:l40s" in slurm_conf
    assert "Port=16902 " in slurm_conf  # the second node, from SLURMD_BASE_PORT
    assert "AccountingStorageTRES=gres/gpu,gres/gpu:l40s,gres/gpu:a100,gres/gpu:mi300x,gres/shard," in slurm_conf
    # Plan enforcement by Slurm itself (deploy/devcluster/README.md, "Plan limits").
    for setting in (
        "AccountingStorageEnforce=associations,limits,qos,safe",
        "JobSubmitPlugins=lua",
        "PriorityDecayHalfLife=0",
        "PriorityUsageResetPeriod=MONTHLY",
        "PriorityCalcPeriod=1",
    ):
        assert setting in lines
    assert "NodeName=gpu-a100-07 Name=shard Type=a100 Count=20 File=/dev/fakegpu/gpu-a100-07/nvidia0" in gres_conf
    assert "rtx4090" not in slurm_conf + gres_conf
    assert arrays.strip() == "gpu-l40s-01 gpu-a100-07|3"


def test_cluster_scripts_stop_on_a_bad_file_with_the_loaders_message(tmp_path):
    bad = _write(tmp_path, _broken(_set(("dev_nodes", 0, "gpu_type"), "h200")))
    done = _cluster_shell(bad, "echo reached")
    assert done.returncode == 1
    assert "reached" not in done.stdout
    assert "dev_nodes[0].gpu_type 'h200' is not in gpu_types" in done.stderr
    assert f"cannot use the GPU types file {bad}" in done.stderr


# --- the running dev cluster agrees with the file ------------------------------------------------


@pytest.mark.slurm
def test_the_running_dev_cluster_has_the_files_nodes(slurm):
    catalog = load_gpu_types(DEFAULT_GPU_TYPES_FILE)
    nodes = {node.name: node for node in slurm.list_nodes()}
    assert set(nodes) == {node.name for node in catalog.dev_nodes}
    for dev in catalog.dev_nodes:
        (group,) = nodes[dev.name].gpus
        assert (group.gpu_type, group.count) == (dev.gpu_type, dev.gpus)
        assert nodes[dev.name].shards_total == dev.gpus * catalog.types[dev.gpu_type].shards_per_gpu
        assert f"gpu_type:{dev.gpu_type}" in nodes[dev.name].features
