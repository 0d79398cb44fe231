#!/usr/bin/env bash
# Debian/Ubuntu packages the portal, its dev cluster and its tests need. Idempotent:
# installs only what is missing, so a warm machine pays one dpkg query.
set -euo pipefail

packages=(
  python3 python3-venv python3-dev build-essential
  redis-server postgresql
  debootstrap
  libkrb5-dev libxkbfile-dev libsecret-1-dev pkg-config  # code-server built for the stand-in images (and npm, below)
  iproute2 util-linux  # the dev cluster's nodes in a network namespace (ip netns, nsenter)
  chromium          # browser tests drive Debian's Chromium through Playwright
  curl ca-certificates
  prometheus        # GPU telemetry read from Prometheus (telemetry/prometheus.py), in the dev stack and tests
  perl              # the Slurm event forwarder (deploy/slurm-events/), tested on the host too
  nginx openssl     # the production shape's proxy and its TLS certificate (deploy/local-production.sh)
  libpango-1.0-0 libpangoft2-1.0-0 fonts-dejavu-core  # WeasyPrint: invoice PDFs
)
# npm fetches code-server and its Node.js from the npm registry; a machine with its own Node.js
# (NodeSource's package carries npm) keeps it, where Debian's npm would conflict with it.
command -v npm >/dev/null || packages+=(npm)
missing=()
for package in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" || missing+=("$package")
done
if ((${#missing[@]})); then
  echo "installing: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
