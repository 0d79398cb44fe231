#!/usr/bin/env python3
"""The dev cluster's GPU layout, generated from the GPU types file (deploy/gpu_types.json).

cluster.sh runs `gpu_layout.py shell FILE --base-port P --cpus C --memory-mb M` once and
evaluates what it prints: the node list, GPUs per node, and the generated slurm.conf node
lines, gres.conf, AccountingStorageTRES and job_submit.lua. So adding a GPU type is one
edit of the file. Runs on the host's bare python3 (standard library only); the file is
checked by foundation/gpu_types.py, the module the portal's settings use.
"""

from __future__ import annotations

import argparse
import importlib.util
import shlex
import sys
from pathlib import Path
from types import ModuleType

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
JOB_SUBMIT_TEMPLATE = HERE / "job_submit.lua"


def _gpu_types_module() -> ModuleType:
    # By path: importing the `gpupool` package would start Celery, absent on the host.
    spec = importlib.util.spec_from_file_location("foundation_gpu_types", REPO / "foundation" / "gpu_types.py")
    module = importlib.util.module_from_spec(spec)
    # dataclasses look their module up in sys.modules while the class is built.
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


gpu_types = _gpu_types_module()


def load(path: Path | str):
    """The checked catalogue; a dev cluster needs at least one node."""
    catalog = gpu_types.load_gpu_types(path)
    if not catalog.dev_nodes:
        raise gpu_types.GpuTypesError(f"GPU types ({path}): dev_nodes is empty; the dev cluster needs nodes")
    return catalog


def used_types(catalog) -> list[str]:
    """Types that have dev nodes, in the file's order."""
    on_nodes = {node.gpu_type for node in catalog.dev_nodes}
    return [name for name in catalog.types if name in on_nodes]


def accounting_tres(catalog) -> str:
    """AccountingStorageTRES: gres/gpu and gres/shard, untyped and for every type, and gres/nvme.

    Every type of the file, not only those with dev nodes: a plan's typed limit
    (gres/gpu:h100=0) can only be set on a TRES that slurmdbd knows. Without gres/nvme
    listed, Slurm still schedules the NVMe cache but slurmdbd does not record it (billing
    meters it from there).
    """
    names = list(catalog.types)
    return ",".join(
        ["gres/gpu", *(f"gres/gpu:{n}" for n in names), "gres/shard", *(f"gres/shard:{n}" for n in names), "gres/nvme"]
    )


def node_lines(catalog, *, base_port: int, cpus: int, memory_mb: int, address: str = "127.0.0.1") -> list[str]:
    """slurm.conf NodeName lines: every GPU of a node is of one type, with its shards (one
    type per node, so no node has shards on only some of its types, which Slurm marks INVAL)."""
    lines = []
    for offset, node in enumerate(catalog.dev_nodes):
        gpu_type = catalog.types[node.gpu_type]
        shards = node.gpus * gpu_type.shards_per_gpu
        # NVMe in plain GB: Slurm reads a K/M/G suffix as powers of 1024.
        nvme = f",nvme:{node.nvme_gb}" if node.nvme_gb else ""
        lines.append(
            f"NodeName={node.name} NodeAddr={address} Port={base_port + offset} CPUs={cpus} RealMemory={memory_mb} "
            f"Gres=gpu:{node.gpu_type}:{node.gpus},shard:{node.gpu_type}:{shards}{nvme} "
            f"Features=gpu_type:{node.gpu_type} State=UNKNOWN"
        )
    return lines


def gres_conf_lines(catalog) -> list[str]:
    """gres.conf: a fake device per GPU, one shard line per GPU (a shard job is bound to one GPU),
    and the node's NVMe cache as a count-only GRES."""
    lines = []
    for node in catalog.dev_nodes:
        devices = [f"/dev/fakegpu/{node.name}/nvidia{i}" for i in range(node.gpus)]
        shards = catalog.types[node.gpu_type].shards_per_gpu
        lines += [f"NodeName={node.name} Name=gpu Type={node.gpu_type} File={dev}" for dev in devices]
        lines += [f"NodeName={node.name} Name=shard Type={node.gpu_type} Count={shards} File={dev}" for dev in devices]
        if node.nvme_gb:
            # Count-only: no device file; Slurm counts GB, the prolog enforces the quota on disk.
            lines.append(f"NodeName={node.name} Name=nvme Count={node.nvme_gb} Flags=CountOnly")
    return lines


def job_submit_lua(catalog, template: str | None = None) -> str:
    """job_submit.lua with this pool's types named in its message to users."""
    template = JOB_SUBMIT_TEMPLATE.read_text(encoding="utf-8") if template is None else template
    names = used_types(catalog)
    # Type names are checked ([a-z][a-z0-9_]*), so they are safe inside a Lua string.
    return template.replace("@GPU_TYPES@", ", ".join(names)).replace("@EXAMPLE_TYPE@", names[0])


def shell(catalog, *, base_port: int, cpus: int, memory_mb: int, address: str = "127.0.0.1") -> str:
    """Bash assignments for cluster.sh (global even when evaluated inside a function)."""
    q = shlex.quote
    nodes = catalog.dev_nodes

    def assoc(values: dict[str, str | int]) -> str:
        return "(" + " ".join(f"[{q(k)}]={q(str(v))}" for k, v in values.items()) + ")"

    return "\n".join(
        [
            "declare -ga NODES=(" + " ".join(q(n.name) for n in nodes) + ")",
            "declare -gA NODE_GPU_TYPE=" + assoc({n.name: n.gpu_type for n in nodes}),
            "declare -gA NODE_GPU_COUNT=" + assoc({n.name: n.gpus for n in nodes}),
            "declare -ga GPU_TYPE_NAMES=(" + " ".join(q(t) for t in used_types(catalog)) + ")",
            "declare -g ACCOUNTING_TRES=" + q(accounting_tres(catalog)),
            "declare -g SLURM_NODE_LINES="
            + q("\n".join(node_lines(catalog, base_port=base_port, cpus=cpus, memory_mb=memory_mb, address=address))),
            "declare -g GRES_CONF_LINES=" + q("\n".join(gres_conf_lines(catalog))),
            "declare -g JOB_SUBMIT_LUA=" + q(job_submit_lua(catalog)),
        ]
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("command", choices=["shell", "check"])
    parser.add_argument("file", type=Path)
    parser.add_argument("--base-port", type=int, default=16901)
    parser.add_argument("--cpus", type=int, default=16)
    parser.add_argument("--memory-mb", type=int, default=64000)
    # Where slurmctld reaches the nodes' slurmds (their network namespace: lib/network.sh).
    parser.add_argument("--node-address", default="127.0.0.1")
    args = parser.parse_args(argv)
    try:
        catalog = load(args.file)
    except gpu_types.GpuTypesError as exc:
        print(exc, file=sys.stderr)
        return 1
    if args.command == "shell":
        print(
            shell(
                catalog, base_port=args.base_port, cpus=args.cpus, memory_mb=args.memory_mb, address=args.node_address
            )
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
