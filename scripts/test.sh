#!/usr/bin/env bash
# The whole suite against the real dev clusters, PostgreSQL, Redis and Chromium.
#
# SLURM_RELEASES (default "24.11,26.05") lists the Slurm generations to test: the first run
# takes every selected test against the first release; each further release runs again only
# the tests marked `slurm` (the database-only ones do not depend on Slurm). A plain `pytest`
# outside this script tests 24.11 alone (gpupool/settings.py's default SLURM_RELEASE).
#   SLURM_RELEASES=26.05 scripts/test.sh -k mirror    # one generation
set -uo pipefail
cd "$(dirname "$0")/.."
export DATABASE_URL=${TEST_DATABASE_URL:-postgres://gpupool:gpupool@127.0.0.1:5432/gpupool}
export DEBUG=1  # manage.py below needs it too; pytest's own defaults are in testing/pytest_env.py
# A Redis database of the tests' own, so a running `make dev` never sees test tasks or events.
export REDIS_URL=${TEST_REDIS_URL:-redis://127.0.0.1:6379/13}
# The e-mail backend, the submit limits, the retry and mirror intervals: testing/pytest_env.py.
export CLUSTER_SYNC_INTERVAL_SECONDS=1
IFS=', ' read -r -a releases <<<"${SLURM_RELEASES:-24.11,26.05}"
((${#releases[@]})) || { echo "SLURM_RELEASES is empty" >&2; exit 2; }
# Each release's cluster is found through SLURM_RELEASE alone (settings derive its URL, root,
# key and job directory); a value of these set by hand would point every run at one cluster.
unset DEVCLUSTER_DIR SLURMRESTD_URL SLURM_JWT_KEY_FILE SLURM_CLI_PREFIX SLURM_JOB_ROOT_LOCAL SLURM_API_VERSION

.venv/bin/ruff check . || exit 1
.venv/bin/python manage.py makemigrations --check --dry-run >/dev/null || { echo "missing migrations"; exit 1; }

# The arguments of a run on a further release: only slurm tests, within the caller's -m, less
# those marked first_release (a UI's or a client's view of what a slurm test checks on every release).
slurm_only_args() {
    local marked=0
    while (($#)); do
        case "$1" in
            -m) marked=1; printf '%s\0' -m "slurm and not first_release and ($2)"; shift 2; continue ;;
            -m*) marked=1; printf '%s\0' -m "slurm and not first_release and (${1#-m})" ;;
            *) printf '%s\0' "$1" ;;
        esac
        shift
    done
    ((marked)) || printf '%s\0' -m "slurm and not first_release"
}

rc=0
summary=()
for i in "${!releases[@]}"; do
    release=${releases[i]}
    if ((i == 0)); then
        args=("$@")
    else
        mapfile -d '' -t args < <(slurm_only_args "$@")
    fi
    echo "=== Slurm $release: pytest ${args[*]}" >&2
    started=$(date +%s)
    SLURM_RELEASE=$release .venv/bin/python -m pytest "${args[@]}"
    run_rc=$?
    summary+=("Slurm $release: exit $run_rc in $(( $(date +%s) - started )) s")
    if ((run_rc == 5 && i == 0)); then
        echo "pytest collected no tests: that is a failure" >&2
        run_rc=1
    elif ((run_rc == 5)); then
        run_rc=0  # the selection held no slurm test: nothing to repeat on this release
    fi
    ((run_rc == 0)) || rc=1
done
printf '%s\n' "${summary[@]}" >&2
exit $rc
