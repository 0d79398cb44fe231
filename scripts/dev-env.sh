#!/usr/bin/env bash
# Writes var/dev.env, the development environment that manage.py and scripts/dev.sh read
# (variables already set in the environment win). Kept if it exists: it may hold your edits.
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p var
if [[ ! -f var/dev.env ]]; then
  cat >var/dev.env <<'ENV'
# Development settings written by `make dev`; manage.py and scripts/dev.sh read this file.
# Never used in production (see deploy/production.env.example). Delete it to get it rewritten.
DEBUG=1
# The dev cluster has no GPUs: telemetry is emulated from real Slurm allocations.
TELEMETRY_EMULATOR=1
ENV
  echo "wrote var/dev.env"
fi
