#!/usr/bin/env bash
# Build the Slurm-web 6.0 agent used by bench/peer/slurmweb_agent.py, outside the repo:
#   /work/peer/src   the Slurm-web tree, exported from the stored snapshot (git archive HEAD)
#   /work/peer/venv  its own virtual environment (not the project's .venv)
# Idempotent: rerun to rebuild. SLURMWEB_PEER_DIR (read by slurmweb_agent.py too) and
# SLURMWEB_MIRROR (the snapshot of rackslab/Slurm-web) override the two paths.
set -euo pipefail
PEER_DIR="${SLURMWEB_PEER_DIR:-/work/peer}"
MIRROR="${SLURMWEB_MIRROR:-/work/.mirror/rackslab+Slurm-web/repo}"
PYTHON="${PYTHON:-python3}"

mkdir -p "$PEER_DIR"
rm -rf "$PEER_DIR/src"
mkdir -p "$PEER_DIR/src"
git -C "$MIRROR" archive HEAD | tar -x -C "$PEER_DIR/src"
grep -q '^version = "6\.0\.' "$PEER_DIR/src/pyproject.toml" || echo "warning: snapshot is not Slurm-web 6.0" >&2

[[ -x "$PEER_DIR/venv/bin/python" ]] || "$PYTHON" -m venv "$PEER_DIR/venv"
"$PEER_DIR/venv/bin/pip" install -q --upgrade pip
# The [agent] extra minus RacksDB[web]: RacksDB's drawing stack needs pycairo, which
# needs the C cairo headers (not on this host). The agent imports RacksDB lazily and
# only when [racksdb] enabled=yes; our config sets enabled=no, so it is not needed.
"$PEER_DIR/venv/bin/pip" install -q "$PEER_DIR/src" ClusterShell prometheus-client redis requests
"$PEER_DIR/venv/bin/slurm-web" --version
