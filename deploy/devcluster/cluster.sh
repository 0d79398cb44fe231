#!/usr/bin/env bash
# deploy/devcluster/cluster.sh -- a real Slurm cluster for development, in one of two
# generations, each in its own Debian root (debootstrap) on this one machine.
#
#   cluster.sh up      build the root if needed, write configs, start what is not
#                      running, wait until REST answers and all nodes are up
#   cluster.sh down    stop everything (by saved PIDs), unmount what `up` mounted
#   cluster.sh status  daemons + node table; exit 1 if slurmctld is not reachable
#   cluster.sh token [USER] [SECONDS]   print an HS256 JWT for USER (default slurm)
#   SLURM_RELEASE=26.05 cluster.sh ...  the same for the other generation (default 24.11)
#
# Generations (SLURM_RELEASE): 24.11 in a Debian 13 "trixie" root (REST v0.0.40-42), and
# 26.05 in a Debian "forky" root (REST v0.0.42-45, no v0.0.41). Each has its own state
# directory and ports, so both run side by side. Why a root: the host is Debian 12
# (Slurm 22.05, REST v0.0.38, gone upstream).
# Why not systemd/containers: the host has neither. Every daemon runs in the
# foreground via `setsid chroot ... &`, so `$!` is the daemon's own PID.
#
# Client commands work from the host as `chroot $DEVCLUSTER_DIR/root scontrol ...`
# (config in the root's /etc/slurm, munge on the root's default socket).
# See README.md next to this file for the layout, timings and traps.
set -euo pipefail

# ---------------------------------------------------------------------------
# Interface (the Django side depends on these defaults)
# ---------------------------------------------------------------------------
# The generation picks the defaults; any of them can still be overridden one by one.
# 24.11's values must stay as they are: other checkouts' tests use that cluster.
SLURM_RELEASE="${SLURM_RELEASE:-24.11}"
case "$SLURM_RELEASE" in
    24.11)
        default_dir=/var/lib/gpupool/devcluster; default_suite=trixie; port_base=16000
        # debootstrap's own script for the suite.
        DEBOOTSTRAP_SCRIPT=""
        # The version rest_ready probes with (one the generation serves).
        REST_PROBE_VERSION=v0.0.41
        MYSQL_EXTRA="" ;;
    26.05)
        default_dir=/var/lib/gpupool/devcluster-26.05; default_suite=forky; port_base=17000
        # Debian 12's debootstrap has no forky script; sid's builds it.
        DEBOOTSTRAP_SCRIPT=/usr/share/debootstrap/scripts/sid
        REST_PROBE_VERSION=v0.0.42
        # MariaDB 11.8 in forky: with snapshot isolation on, slurmdbd 26.05 warns it will
        # fatal on a write conflict.
        MYSQL_EXTRA="innodb_snapshot_isolation=OFF" ;;
    *)
        echo "SLURM_RELEASE must be 24.11 or 26.05, not '$SLURM_RELEASE'" >&2
        exit 2 ;;
esac
DEVCLUSTER_DIR="${DEVCLUSTER_DIR:-$default_dir}"
ROOT="$DEVCLUSTER_DIR/root"
PIDDIR="$DEVCLUSTER_DIR/pids"
SUITE="${DEVCLUSTER_SUITE:-$default_suite}"
CLUSTER_NAME="${DEVCLUSTER_CLUSTER_NAME:-gpupool}"
SLURMCTLD_PORT="${DEVCLUSTER_SLURMCTLD_PORT:-$((port_base + 817))}"
SLURMDBD_PORT="${DEVCLUSTER_SLURMDBD_PORT:-$((port_base + 819))}"
REST_ADDR="${DEVCLUSTER_REST_ADDR:-127.0.0.1}"
REST_PORT="${DEVCLUSTER_REST_PORT:-$((port_base + 820))}"
SLURMD_BASE_PORT="${DEVCLUSTER_SLURMD_BASE_PORT:-$((port_base + 901))}"
MYSQL_PORT="${DEVCLUSTER_MYSQL_PORT:-$((port_base + 306))}"
# The nodes' slurmds, and so every job, run in a network namespace of their own (lib/network.sh):
# a job reaches this host only at NODE_HOST_ADDR, never its loopback (Redis, PostgreSQL, the
# portal, Prometheus listen there). DEVCLUSTER_ISOLATE_JOBS=0: jobs share the host's network.
ISOLATE_JOBS="${DEVCLUSTER_ISOLATE_JOBS:-1}"
NODE_NETNS="gpupool-nodes-$port_base"
NODE_HOST_IF="gpn${port_base}h"
NODE_IF="gpn${port_base}n"
NODE_NET="10.231.$(( (port_base - 15000) / 1000 ))"    # 24.11: 10.231.1.0/24, 26.05: 10.231.2.0/24
if [[ "$ISOLATE_JOBS" == 1 ]]; then
    NODE_HOST_ADDR="$NODE_NET.1"
    NODE_ADDR="$NODE_NET.2"
    CTLD_ADDR="$NODE_HOST_ADDR"
else
    NODE_HOST_ADDR=127.0.0.1
    NODE_ADDR=127.0.0.1
    CTLD_ADDR=127.0.0.1
fi
JOBS_DIR="${DEVCLUSTER_JOBS_DIR:-/srv/gpupool/jobs}"        # path inside the root
READY_TIMEOUT="${DEVCLUSTER_READY_TIMEOUT:-90}"              # seconds, per wait
# The free plan's floor (lib/configs.sh): its GPU type and how many of its GPUs the floor holds.
FREE_FLOOR_GPU_TYPE="${FREE_FLOOR_GPU_TYPE:-rtx4090}"
FREE_FLOOR_GPUS="${FREE_FLOOR_GPUS:-1}"

PACKAGES=(slurmctld slurmd slurmdbd slurmrestd slurm-client slurm-wlm-basic-plugins
          slurm-wlm-mysql-plugin slurm-wlm-jwt-plugin munge mariadb-server)

# Nodes, their GPU types and shards come from the GPU types file the portal reads too
# (GPU_TYPES_FILE, the same variable as the portal's setting): load_gpu_layout below
# sets NODES, NODE_GPU_TYPE, NODE_GPU_COUNT and the generated config lines.
GPU_TYPES_FILE="${GPU_TYPES_FILE:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/gpu_types.json}"
NODE_CPUS=16
NODE_MEMORY_MB=64000

# Files inside the root (absolute paths as the root sees them).
JWT_KEY=/etc/slurm/jwt_hs256.key
DB_PASS_FILE=/etc/slurm/.devcluster-dbpass
MYSQL_CNF=/etc/mysql/devcluster.cnf
OUTLOG=/var/log/devcluster          # daemons' stdout/stderr (opened by this script)
BUILT_MARKER="$ROOT/.devcluster-packages-installed"

# Host-side environment must not leak into the cluster's clients or daemons.
unset SLURM_CONF SLURM_JWT SLURMRESTD_SECURITY || true
export LC_ALL=C

PYTHON="$(command -v /usr/bin/python3 || command -v python3 || true)"

# The parts, in the order they build on each other.
DEVCLUSTER_LIB="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/lib"
# shellcheck source=lib/common.sh
source "$DEVCLUSTER_LIB/common.sh"
# shellcheck source=lib/root.sh
source "$DEVCLUSTER_LIB/root.sh"
# shellcheck source=lib/configs.sh
source "$DEVCLUSTER_LIB/configs.sh"
# shellcheck source=lib/daemons.sh
source "$DEVCLUSTER_LIB/daemons.sh"
# shellcheck source=lib/containers.sh
source "$DEVCLUSTER_LIB/containers.sh"
# shellcheck source=lib/network.sh
source "$DEVCLUSTER_LIB/network.sh"
load_gpu_layout
load_image_layout

# ---------------------------------------------------------------------------
# Subcommands
# ---------------------------------------------------------------------------
all_daemons() { echo munged mariadb slurmdbd slurmctld event-forwarder "${NODES[@]/#/slurmd-}" slurmrestd; }

UP_STARTED_AT=0
cmd_up() {
    local t0; t0=$(now)
    UP_STARTED_AT=$(( $(date +%s) - 1 ))
    mkdir -p "$DEVCLUSTER_DIR" "$PIDDIR"
    build_root
    mount_pseudo_filesystems
    prepare_root
    prepare_containers
    write_configs
    # Before any slurmd: job steps enter it (lib/containers.sh).
    start_step_namespace
    # Before any slurmd too: they start in it (lib/network.sh).
    start_node_network

    start_munged
    start_mariadb
    start_slurmdbd
    # Before slurmctld, so it loads the associations on its first start.
    setup_accounting
    start_slurmctld
    cap_floor_qos
    start_event_forwarder
    start_slurmds
    start_slurmrestd

    wait_for "slurmrestd to answer an authenticated request" "$READY_TIMEOUT" slurmrestd rest_ready ||
        die_with_log slurmrestd "$OUTLOG/slurmrestd.out"
    wait_for "all nodes to be up" "$READY_TIMEOUT" - nodes_ready || {
        timeout 10 chroot "$ROOT" sinfo -N -l >&3 || true
        die_with_log slurmctld /var/log/slurm/slurmctld.log
    }

    if ((${#STARTED[@]})); then
        log "cluster up in $(since "$t0") s (started: ${STARTED[*]})"
    else
        log "all daemons were already running ($(since "$t0") s)"
    fi
    summary
}

summary() {
    cat <<EOF
Slurm $SLURM_RELEASE devcluster '$CLUSTER_NAME' is up.
  root:        $ROOT
  clients:     chroot $ROOT sinfo | scontrol | sacctmgr | sbatch ...
  release:     Slurm $SLURM_RELEASE ($(installed_slurm_version))
  REST:        http://$REST_ADDR:$REST_PORT/slurm/$REST_PROBE_VERSION/  (JWT, X-SLURM-USER-NAME / X-SLURM-USER-TOKEN)
  JWT key:     $ROOT$JWT_KEY
  jobs dir:    $JOBS_DIR in the root = $ROOT$JOBS_DIR on the host
  logs:        $ROOT/var/log/{slurm,munge,mysql,devcluster}/
EOF
    node_table
}

node_table() {
    # GPUs by type and shards, from each node's configured/allocated TRES.
    timeout 15 chroot "$ROOT" scontrol -o show node 2>/dev/null | awk '
        function field(k,   i) { for (i = 1; i <= NF; i++) if (index($i, k "=") == 1) return substr($i, length(k) + 2); return "" }
        function tres(s, k,   n, a, i, kv) { n = split(s, a, ","); for (i = 1; i <= n; i++) { split(a[i], kv, "="); if (kv[1] == k) return kv[2] } return 0 }
        BEGIN { printf "%-13s %-20s %-8s %-9s %-11s %s\n", "NODE", "STATE", "GPU", "GPUS", "SHARDS", "CPUS" }
        {
            name = field("NodeName"); state = field("State"); gres = field("Gres")
            split(gres, g, ","); split(g[1], t, ":"); type = t[2]
            cfg = field("CfgTRES"); alloc = field("AllocTRES")
            printf "%-13s %-20s %-8s %-9s %-11s %s\n", name, state, type,
                tres(alloc, "gres/gpu") "/" tres(cfg, "gres/gpu") " used",
                tres(alloc, "gres/shard") "/" tres(cfg, "gres/shard"),
                field("CPUAlloc") "/" field("CPUTot")
        }'
}

# Jobs cannot survive `down` (their processes live in the root). Tell
# slurmctld first, by marking the nodes that run jobs DOWN: it ends those jobs
# as a node failure (batch jobs are requeued, as on a real cluster) and the
# nodes return by themselves at the next `up` (ReturnToService=2). Without
# this, slurmctld restores the jobs as RUNNING and keeps their GPUs allocated
# long after the restart.
fail_running_jobs() {
    is_running slurmctld || return 0
    local nodes
    nodes=$(timeout 10 chroot "$ROOT" squeue -h -t RUNNING,COMPLETING,CONFIGURING,SUSPENDED,STOPPED \
            -o '%N' 2>/dev/null | sort -u | paste -sd, -) || return 0
    [[ -n "$nodes" ]] || return 0
    log "jobs still running on $nodes: marking those nodes DOWN so slurmctld ends them"
    timeout 10 chroot "$ROOT" scontrol update NodeName="$nodes" State=DOWN \
        Reason="devcluster down while jobs were running" || return 0
    wait_for "running jobs to end" 15 - no_running_jobs || true
}

no_running_jobs() {
    local out
    out=$(timeout 10 chroot "$ROOT" squeue -h -t RUNNING,COMPLETING,CONFIGURING -o '%i') || return 1
    [[ -z "$out" ]]
}

cmd_down() {
    local t0; t0=$(now)
    if [[ -d "$ROOT" && -d "$PIDDIR" ]]; then
        fail_running_jobs
    fi
    if [[ -d "$PIDDIR" ]]; then
        # Reverse start order; independent daemons of one tier stop together.
        stop_daemons slurmrestd event-forwarder
        stop_daemons "${NODES[@]/#/slurmd-}"
        stop_daemons slurmctld
        stop_daemons slurmdbd
        stop_daemons mariadb
        stop_daemons munged
    fi
    if [[ -d "$ROOT" ]]; then
        kill_processes_in_root      # job steps, anything else chrooted in
        stop_step_namespace
        stop_node_network
        unmount_pseudo_filesystems
    fi
    log "cluster down ($(since "$t0") s)"
}

cmd_status() {
    if [[ ! -f "$BUILT_MARKER" ]]; then
        echo "root not built at $ROOT (run: $0 up)"
        return 1
    fi
    local name pid
    printf '%-22s %-8s %s\n' DAEMON PID STATE
    for name in $(all_daemons); do
        pid=$(pid_of "$name")
        if pid_alive "$pid"; then
            printf '%-22s %-8s %s\n' "$name" "$pid" running
        else
            printf '%-22s %-8s %s\n' "$name" - "not running"
        fi
    done
    echo
    local ping
    if ! is_running slurmctld || ! ping=$(timeout 15 chroot "$ROOT" scontrol ping 2>&1) || [[ "$ping" != *UP* ]]; then
        echo "slurmctld is not reachable"
        return 1
    fi
    node_table
    echo
    echo "REST: http://$REST_ADDR:$REST_PORT  $(rest_ready 2>/dev/null && echo answering || echo NOT answering)"
}

cmd_token() {
    mint_token "${1:-slurm}" "${2:-3600}"
}

usage() {
    sed -n '2,10p' "$0" | sed 's/^# \{0,1\}//'
    exit 2
}

main() {
    [[ $# -ge 1 ]] || usage
    local cmd="$1"; shift
    case "$cmd" in
        up|down|status) ;;
        token) cmd_token "$@"; return ;;
        *) usage ;;
    esac
    [[ $EUID -eq 0 ]] || die "must run as root (chroot, mount, mknod)"
    if [[ "$cmd" != status ]]; then
        mkdir -p "$DEVCLUSTER_DIR"
        # Serialise concurrent up/down (e.g. parallel test runs). Daemons do not
        # inherit fd 9 (start_daemon closes it), so the lock ends with us.
        exec 9>"$DEVCLUSTER_DIR/.lock"
        flock -w 600 9 || die "another cluster.sh is running (lock $DEVCLUSTER_DIR/.lock)"
    fi
    case "$cmd" in
        up) cmd_up ;;
        down) cmd_down ;;
        status) cmd_status ;;
    esac
}

main "$@"
