#!/usr/bin/env bash
# The whole suite against the real dev cluster, PostgreSQL, Redis and Chromium.
set -uo pipefail
cd "$(dirname "$0")/.."
export DATABASE_URL=${TEST_DATABASE_URL:-postgres://gpupool:gpupool@127.0.0.1:5432/gpupool}
export DEBUG=1
export EMAIL_BACKEND=django.core.mail.backends.locmem.EmailBackend
.venv/bin/ruff check . || exit 1
.venv/bin/python manage.py makemigrations --check --dry-run >/dev/null || { echo "missing migrations"; exit 1; }
.venv/bin/python -m pytest "$@"
rc=$?
if [[ $rc -eq 5 ]]; then
  echo "pytest collected no tests: that is a failure" >&2
  exit 1
fi
exit $rc
