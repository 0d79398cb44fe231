#!/usr/bin/env bash
# The whole suite against the real dev cluster, PostgreSQL, Redis and Chromium.
set -uo pipefail
cd "$(dirname "$0")/.."
export DATABASE_URL=${TEST_DATABASE_URL:-postgres://gpupool:gpupool@127.0.0.1:5432/gpupool}
export DEBUG=1
export EMAIL_BACKEND=django.core.mail.backends.locmem.EmailBackend
# A Redis database of the tests' own, so a running `make dev` never sees test tasks or events.
export REDIS_URL=${TEST_REDIS_URL:-redis://127.0.0.1:6379/13}
# Tests submit many jobs from 127.0.0.1; the limit itself is tested with its own setting.
export SUBMIT_RATE_LIMIT_PER_MINUTE=${SUBMIT_RATE_LIMIT_PER_MINUTE:-10000}
export SUBMIT_RATE_LIMIT_PER_IP_PER_MINUTE=${SUBMIT_RATE_LIMIT_PER_IP_PER_MINUTE:-10000}
export SUBMIT_RETRY_MAX_SECONDS=3
export CLUSTER_SYNC_INTERVAL_SECONDS=1
.venv/bin/ruff check . || exit 1
.venv/bin/python manage.py makemigrations --check --dry-run >/dev/null || { echo "missing migrations"; exit 1; }
.venv/bin/python -m pytest "$@"
rc=$?
if [[ $rc -eq 5 ]]; then
  echo "pytest collected no tests: that is a failure" >&2
  exit 1
fi
exit $rc
