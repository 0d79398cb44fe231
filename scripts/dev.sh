#!/usr/bin/env bash
# Run the portal: web (gpupool/serve.py, HTTP + WebSocket), Celery worker and Celery beat.
# Ctrl-C stops all three; they are stopped by their own PIDs.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=.venv/bin/python
PORT=${PORT:-8000}
scripts/dev-env.sh
# The same environment manage.py reads (variables already set win), for the web process and Celery too.
while IFS= read -r line; do
  name=${line%%=*}
  if [[ -z "${!name+x}" ]]; then export "$line"; fi
done < <(grep -E '^[A-Z_][A-Z0-9_]*=' var/dev.env)
mkdir -p var/log
# Both dev cluster generations in one portal: the other one's (if built) as a further cluster
# (cluster/clusters/registry.py). DEV_CLUSTERS_FILE=0: the SLURM_RELEASE cluster alone.
if [[ "${DEV_CLUSTERS_FILE:-1}" != 0 && -z "${CLUSTERS_FILE:-}" ]]; then
  CLUSTERS_FILE= $PY manage.py write_dev_clusters var/dev-clusters.json
  export CLUSTERS_FILE=$PWD/var/dev-clusters.json
fi

pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
}
trap cleanup EXIT INT TERM

# The dev stack's Prometheus (Debian's package) scrapes the emulator served as one DCGM exporter
# per node, and the portal reads its GPUs from Prometheus (telemetry/prometheus.py), as on a site
# that runs dcgm-exporter. DEV_PROMETHEUS=0, or no prometheus binary: the emulator writes directly.
PROMETHEUS_PORT=${PROMETHEUS_PORT:-9090}
if [[ "${DEV_PROMETHEUS:-1}" != 0 && -x /usr/bin/prometheus && -z "${PROMETHEUS_URL:-}" ]]; then
  mkdir -p var/prometheus
  $PY manage.py serve_emulated_dcgm --bind 127.0.0.1:9400 --prometheus-config var/prometheus/prometheus.yml \
    >var/log/dcgm-emulator.log 2>&1 &
  pids+=($!)
  for _ in $(seq 50); do [[ -s var/prometheus/prometheus.yml ]] && break; sleep 0.2; done
  /usr/bin/prometheus --config.file=var/prometheus/prometheus.yml --storage.tsdb.path=var/prometheus/data \
    --storage.tsdb.retention.time=2d --web.listen-address=127.0.0.1:$PROMETHEUS_PORT >var/log/prometheus.log 2>&1 &
  pids+=($!)
  export PROMETHEUS_URL=http://127.0.0.1:$PROMETHEUS_PORT
  echo "Prometheus on $PROMETHEUS_URL scraping the emulated DCGM exporters (var/log/prometheus.log)"
fi

.venv/bin/celery -A gpupool worker --loglevel=INFO --concurrency=2 >var/log/worker.log 2>&1 &
pids+=($!)
.venv/bin/celery -A gpupool beat --loglevel=INFO --schedule=var/celerybeat-schedule >var/log/beat.log 2>&1 &
pids+=($!)
echo "worker log: var/log/worker.log, beat log: var/log/beat.log"
echo "portal on http://127.0.0.1:$PORT (passwords: var/demo-passwords.txt)"
$PY -m gpupool.serve --host 127.0.0.1 --port "$PORT" &
pids+=($!)
wait "${pids[-1]}"
