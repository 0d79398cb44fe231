#!/usr/bin/env bash
# Run the portal: web (Daphne, HTTP + WebSocket), Celery worker and Celery beat.
# Ctrl-C stops all three; they are stopped by their own PIDs.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=.venv/bin/python
PORT=${PORT:-8000}
scripts/dev-env.sh
# The same environment manage.py reads (variables already set win), for Daphne and Celery too.
while IFS= read -r line; do
  name=${line%%=*}
  if [[ -z "${!name+x}" ]]; then export "$line"; fi
done < <(grep -E '^[A-Z_][A-Z0-9_]*=' var/dev.env)
mkdir -p var/log

pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
}
trap cleanup EXIT INT TERM

.venv/bin/celery -A gpupool worker --loglevel=INFO --concurrency=2 >var/log/worker.log 2>&1 &
pids+=($!)
.venv/bin/celery -A gpupool beat --loglevel=INFO --schedule=var/celerybeat-schedule >var/log/beat.log 2>&1 &
pids+=($!)
echo "worker log: var/log/worker.log, beat log: var/log/beat.log"
echo "portal on http://127.0.0.1:$PORT (passwords: var/demo-passwords.txt)"
$PY -m daphne -b 127.0.0.1 -p "$PORT" gpupool.asgi:application &
pids+=($!)
wait "${pids[-1]}"
