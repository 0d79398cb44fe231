#!/usr/bin/env bash
# Build the Slurm-web 6.0 agent used by bench/peer/slurmweb_agent.py, outside the portal's code:
#   $SLURMWEB_PEER_DIR/src   the Slurm-web tree, exported from a git clone of rackslab/Slurm-web
#   $SLURMWEB_PEER_DIR/venv  its own virtual environment (not the project's .venv)
# Idempotent: rerun to rebuild. SLURMWEB_PEER_DIR (read by slurmweb_agent.py too) defaults to
# bench/peer/.work (ignored by git); SLURMWEB_MIRROR names the clone (a bare one will do) and
# must be given.
set -euo pipefail
PEER_DIR="${SLURMWEB_PEER_DIR:-$(cd "$(dirname "$0")" && pwd)/.work}"
MIRROR="${SLURMWEB_MIRROR:?set SLURMWEB_MIRROR to a git clone of rackslab/Slurm-web at its 6.0 release}"
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
