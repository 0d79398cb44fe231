#!/usr/bin/env bash
# Repeat a selection of tests to find the ones that fail only sometimes.
#
#   scripts/test-flaky.sh [N] [pytest args...]      (make test-flaky N=5 ARGS='-k mirror')
#
# Runs the selection N times (default 5) on every release in SLURM_RELEASES, through
# scripts/test.sh (so each run has the same settings as `make test`), and prints every test
# that failed with the runs it failed in. Without pytest args it takes the tests marked
# `slurm` or `browser`: the ones that meet real daemons and a real browser, where timing
# races live. Exit 1 when any run failed.
set -uo pipefail
cd "$(dirname "$0")/.."
runs=${1:-5}
shift || true
(($#)) || set -- -m "slurm or browser"
logdir=${FLAKY_LOG_DIR:-$(mktemp -d /tmp/gpupool-flaky.XXXXXX)}
mkdir -p "$logdir"
IFS=', ' read -r -a releases <<<"${SLURM_RELEASES:-24.11,26.05}"

failed_runs=0
for ((run = 1; run <= runs; run++)); do
    for release in "${releases[@]}"; do
        log="$logdir/run$run-$release.log"
        started=$(date +%s)
        # -rf: one "FAILED test::id - reason" line per failure, read back below.
        SLURM_RELEASES=$release scripts/test.sh -q -rf "$@" >"$log" 2>&1
        rc=$?
        outcome=$(grep -E '[0-9]+ (passed|failed|error)' "$log" | tail -n 1)
        echo "run $run, Slurm $release: exit $rc in $(($(date +%s) - started)) s: ${outcome:-no pytest summary}"
        ((rc == 0)) || failed_runs=$((failed_runs + 1))
    done
done

echo "--- $((runs * ${#releases[@]})) runs, $failed_runs failed; logs in $logdir"
grep -h '^FAILED \|^ERROR ' "$logdir"/run*.log | sed 's/ - .*//' | sort | uniq -c | sort -rn
((failed_runs == 0))
