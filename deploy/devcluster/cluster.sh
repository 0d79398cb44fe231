#!/usr/bin/env bash
# deploy/devcluster/cluster.sh -- a real Slurm 24.11 cluster for development,
# running inside a Debian 13 "trixie" root (debootstrap) on this one machine.
#
#   cluster.sh up      build the root if needed, write configs, start what is not
#                      running, wait until REST answers and all nodes are up
#   cluster.sh down    stop everything (by saved PIDs), unmount what `up` mounted
#   cluster.sh status  daemons + node table; exit 1 if slurmctld is not reachable
#   cluster.sh token [USER] [SECONDS]   print an HS256 JWT for USER (default slurm)
#
# Why a root: the host is Debian 12 (Slurm 22.05, REST v0.0.38, gone upstream);
# trixie ships Slurm 24.11 with the REST API the portal speaks (v0.0.41).
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
DEVCLUSTER_DIR="${DEVCLUSTER_DIR:-/var/lib/gpupool/devcluster}"
ROOT="$DEVCLUSTER_DIR/root"
PIDDIR="$DEVCLUSTER_DIR/pids"
SUITE="${DEVCLUSTER_SUITE:-trixie}"
CLUSTER_NAME="${DEVCLUSTER_CLUSTER_NAME:-gpupool}"
SLURMCTLD_PORT="${DEVCLUSTER_SLURMCTLD_PORT:-16817}"
SLURMDBD_PORT="${DEVCLUSTER_SLURMDBD_PORT:-16819}"
REST_ADDR="${DEVCLUSTER_REST_ADDR:-127.0.0.1}"
REST_PORT="${DEVCLUSTER_REST_PORT:-16820}"
SLURMD_BASE_PORT="${DEVCLUSTER_SLURMD_BASE_PORT:-16901}"
MYSQL_PORT="${DEVCLUSTER_MYSQL_PORT:-16306}"
JOBS_DIR="${DEVCLUSTER_JOBS_DIR:-/srv/gpupool/jobs}"        # path inside the root
READY_TIMEOUT="${DEVCLUSTER_READY_TIMEOUT:-90}"              # seconds, per wait

PACKAGES=(slurmctld slurmd slurmdbd slurmrestd slurm-client slurm-wlm-basic-plugins
          slurm-wlm-mysql-plugin slurm-wlm-jwt-plugin munge mariadb-server)

# Nodes: name -> GPU type, GPUs per node. Shards are 4 GB of GPU memory each
# (the portal's convention; Slurm does not enforce memory per shard).
NODES=(gpu-4090-01 gpu-4090-02 gpu-a100-01 gpu-a100-02 gpu-h100-01)
declare -A NODE_GPU_TYPE=([gpu-4090-01]=rtx4090 [gpu-4090-02]=rtx4090
                          [gpu-a100-01]=a100 [gpu-a100-02]=a100 [gpu-h100-01]=h100)
declare -A NODE_GPU_COUNT=([gpu-4090-01]=4 [gpu-4090-02]=4
                           [gpu-a100-01]=4 [gpu-a100-02]=4 [gpu-h100-01]=2)
declare -A SHARDS_PER_GPU=([rtx4090]=6 [a100]=10 [h100]=20)   # 24/40/80 GB / 4 GB
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

# ---------------------------------------------------------------------------
# Small helpers
# ---------------------------------------------------------------------------
# Messages go to fd 3 (a copy of stderr made in main), so they still show
# when a probe's stderr is silenced inside wait_for.
exec 3>&2
log()  { printf '[devcluster %s] %s\n' "$(date +%T)" "$*" >&3; }
die()  { log "ERROR: $*"; exit 1; }
now()  { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }

# Run a command inside the root as root (clients, sacctmgr, chown by name...).
in_root() { chroot "$ROOT" "$@"; }

# Poll until "$@" succeeds; bounded, short interval (never a fixed sleep).
# wait_for WHAT TIMEOUT DAEMON|- CMD...: gives up at once if DAEMON died.
wait_for() {
    local what="$1" timeout="$2" daemon="$3"; shift 3
    local deadline=$(( $(date +%s) + timeout ))
    until "$@" >/dev/null 2>&1; do
        if [[ "$daemon" != - ]] && ! is_running "$daemon"; then
            log "$daemon exited while waiting for $what"
            return 1
        fi
        if (( $(date +%s) >= deadline )); then
            log "timed out after ${timeout}s waiting for $what"
            return 1
        fi
        sleep 0.2
    done
}

# Is TCP port $1 in LISTEN state? Read /proc/net/tcp* rather than connecting,
# so probing leaves no "connection reset" noise in the daemons' logs.
port_listening() {
    local hex; hex=$(printf ':%04X' "$1")
    awk -v p="$hex" '$4 == "0A" && substr($2, length($2) - 4) == p { f = 1 } END { exit !f }' \
        /proc/net/tcp /proc/net/tcp6 2>/dev/null
}

# Write $2 (content) to $1 (a path in the root) only when content, mode or
# owner differ, so a repeated `up` is a true no-op; changed paths are collected
# in CHANGED_FILES. $3 = mode, $4 = owner (resolved inside the root).
CHANGED_FILES=()
write_config() {
    local path="$1" content="$2" mode="$3" owner="${4:-root:root}"
    local file="$ROOT$path" tmp
    mkdir -p "$(dirname "$file")"
    tmp=$(mktemp "$file.XXXXXX")
    printf '%s\n' "$content" >"$tmp"
    chmod "$mode" "$tmp"
    in_root chown "$owner" "${path}${tmp#"$file"}"
    if [[ -f "$file" ]] && cmp -s "$tmp" "$file" \
       && [[ "$(stat -c %a:%U "$file")" == "$(stat -c %a:%U "$tmp")" ]]; then
        rm -f "$tmp"
    else
        mv -f "$tmp" "$file"
        CHANGED_FILES+=("$path")
    fi
}

# ---------------------------------------------------------------------------
# Process bookkeeping: one pid file per daemon in $PIDDIR
# ---------------------------------------------------------------------------
pid_of() { [[ -s "$PIDDIR/$1.pid" ]] && cat "$PIDDIR/$1.pid" || true; }

# Alive = exists, not a zombie (stopped daemons linger as zombies for a moment
# here), and chrooted into our root (guards against a recycled PID).
pid_alive() {
    local pid="$1" state
    [[ -n "$pid" && -r "/proc/$pid/status" ]] || return 1
    state=$(awk '/^State:/ { print $2 }' "/proc/$pid/status" 2>/dev/null) || return 1
    [[ -n "$state" && "$state" != Z && "$state" != X ]] || return 1
    [[ "$(readlink "/proc/$pid/root" 2>/dev/null)" == "$ROOT" ]]
}

is_running() { pid_alive "$(pid_of "$1")"; }

# start_daemon NAME USERSPEC|"" ENV... -- CMD ARGS...
# `setsid chroot` in a non-interactive shell does not fork (the background job
# is not a process group leader), so $! is the daemon itself. The daemon gets a
# clean environment (env -i): a SLURM_JWT leaking into slurmd makes it reject
# munge RPCs. Its stdio goes to a file, never to our caller's pipes (a caller
# capturing our output would otherwise wait for the daemons to exit). fds 3
# (our log) and 9 (our flock) must not be inherited either.
start_daemon() {
    local name="$1" userspec="$2"; shift 2
    local envs=()
    while [[ "$1" != -- ]]; do envs+=("$1"); shift; done
    shift
    if is_running "$name"; then
        return 0
    fi
    local -a chroot_args=()
    [[ -n "$userspec" ]] && chroot_args=(--userspec="$userspec")
    setsid chroot "${chroot_args[@]}" "$ROOT" \
        env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin LANG=C.UTF-8 "${envs[@]}" "$@" \
        </dev/null >>"$ROOT$OUTLOG/$name.out" 2>&1 3>&- 9>&- &
    echo $! >"$PIDDIR/$name.pid"
    STARTED+=("$name")
    log "started $name (pid $!)"
}
STARTED=()

# Send TERM to the named daemons at once, wait (bounded), then KILL stragglers.
stop_daemons() {
    local name pid pids=() deadline
    for name in "$@"; do
        pid=$(pid_of "$name")
        if pid_alive "$pid"; then
            kill -TERM "$pid" 2>/dev/null || true
            pids+=("$pid")
            log "stopping $name (pid $pid)"
        fi
    done
    if ((${#pids[@]})); then
        wait_pids_gone 20 "${pids[@]}" || {
            for pid in "${pids[@]}"; do pid_alive "$pid" && kill -KILL "$pid" 2>/dev/null || true; done
            wait_pids_gone 5 "${pids[@]}" || log "WARNING: some processes survived KILL: ${pids[*]}"
        }
    fi
    for name in "$@"; do rm -f "$PIDDIR/$name.pid"; done
}

wait_pids_gone() {
    local timeout="$1"; shift
    local deadline=$(( $(date +%s) + timeout )) pid alive
    while :; do
        alive=0
        for pid in "$@"; do pid_alive "$pid" && alive=1; done
        ((alive)) || return 0
        (( $(date +%s) >= deadline )) && return 1
        sleep 0.1
    done
}

# Every process whose root is our root: job steps (slurmstepd and the job's own
# processes survive slurmd), leftovers of an interrupted build, ...
processes_in_root() {
    local p pid
    for p in /proc/[0-9]*; do
        pid=${p#/proc/}
        [[ "$pid" == "$$" ]] && continue
        pid_alive "$pid" && echo "$pid"
    done
    return 0
}

kill_processes_in_root() {
    local pids
    mapfile -t pids < <(processes_in_root)
    ((${#pids[@]})) || return 0
    log "stopping ${#pids[@]} leftover process(es) in the root: ${pids[*]}"
    kill -TERM "${pids[@]}" 2>/dev/null || true
    wait_pids_gone 3 "${pids[@]}" || {
        kill -KILL "${pids[@]}" 2>/dev/null || true
        wait_pids_gone 5 "${pids[@]}" || true
    }
}

# ---------------------------------------------------------------------------
# Mounts: fresh instances, never bind mounts of the host's
# ---------------------------------------------------------------------------
MOUNTS=(proc sys dev/pts dev/shm)   # mount order; unmount in reverse

mount_pseudo_filesystems() {
    mkdir -p "$ROOT/proc" "$ROOT/sys" "$ROOT/dev/pts" "$ROOT/dev/shm"
    mountpoint -q "$ROOT/proc"    || mount -t proc  proc  "$ROOT/proc"
    mountpoint -q "$ROOT/sys"     || mount -t sysfs sysfs "$ROOT/sys"
    mountpoint -q "$ROOT/dev/pts" || mount -t devpts -o newinstance,ptmxmode=0666,mode=0620,gid=5 devpts "$ROOT/dev/pts"
    mountpoint -q "$ROOT/dev/shm" || mount -t tmpfs -o mode=1777,size=256m tmpfs "$ROOT/dev/shm"
}

unmount_pseudo_filesystems() {
    local i m
    for ((i = ${#MOUNTS[@]} - 1; i >= 0; i--)); do
        m="$ROOT/${MOUNTS[i]}"
        if [[ -d "$m" ]] && mountpoint -q "$m"; then
            umount "$m" 2>/dev/null || umount -l "$m"
        fi
    done
}

# Everything mounted anywhere below the root (deepest first); used before a
# half-built root is deleted, so `rm -rf` can never walk into /proc or a bind
# mount left behind by an interrupted debootstrap.
unmount_everything_below_root() {
    local m
    awk -v r="$ROOT/" 'index($5, r) == 1 { print $5 }' /proc/self/mountinfo | sort -r |
    while read -r m; do umount "$m" 2>/dev/null || umount -l "$m"; done
}

# ---------------------------------------------------------------------------
# Building the root
# ---------------------------------------------------------------------------
# The mirror is taken from the host's apt sources (never hard-coded).
debian_mirror() {
    if [[ -n "${DEBIAN_MIRROR:-}" ]]; then echo "$DEBIAN_MIRROR"; return; fi
    local uri=""
    shopt -s nullglob
    local f
    for f in /etc/apt/sources.list.d/*.sources; do
        uri=$(awk 'tolower($1) == "uris:" && $2 !~ /security/ { print $2; exit }' "$f")
        [[ -n "$uri" ]] && break
    done
    shopt -u nullglob
    if [[ -z "$uri" && -r /etc/apt/sources.list ]]; then
        uri=$(awk '$1 == "deb" { for (i = 2; i <= NF; i++) if ($i !~ /^\[/ && $i !~ /\]$/ && $i ~ /:\/\//) { print $i; exit } }' \
              /etc/apt/sources.list)
    fi
    [[ -n "$uri" ]] || die "cannot derive a Debian mirror from the host's apt sources; set DEBIAN_MIRROR"
    echo "${uri%/}"
}

ensure_debootstrap() {
    command -v debootstrap >/dev/null && return
    log "installing debootstrap on the host"
    apt-get install -y debootstrap >/dev/null 2>&1 || {
        apt-get update >/dev/null
        apt-get install -y debootstrap >/dev/null
    }
}

build_root() {
    [[ -f "$BUILT_MARKER" ]] && return 0
    local t0; t0=$(now)
    if [[ -e "$ROOT" ]]; then
        log "found a half-built root at $ROOT: removing it and starting over"
        kill_processes_in_root
        unmount_everything_below_root
        rm -rf --one-file-system "$ROOT"
    fi
    ensure_debootstrap
    local mirror; mirror=$(debian_mirror)
    log "debootstrap --variant=minbase $SUITE from $mirror (takes ~30 s)"
    mkdir -p "$ROOT"
    debootstrap --variant=minbase "$SUITE" "$ROOT" "$mirror" >"$DEVCLUSTER_DIR/debootstrap.log" 2>&1 \
        || die "debootstrap failed, see $DEVCLUSTER_DIR/debootstrap.log"

    # No init system in the root: keep package scripts from starting daemons.
    printf '#!/bin/sh\nexit 101\n' >"$ROOT/usr/sbin/policy-rc.d"
    chmod 755 "$ROOT/usr/sbin/policy-rc.d"
    # Same leniency as the host (snapshot-style mirrors have stale Valid-Until).
    printf 'Acquire::Check-Valid-Until "false";\nAPT::Install-Recommends "false";\n' \
        >"$ROOT/etc/apt/apt.conf.d/99devcluster"
    cp -f /etc/resolv.conf "$ROOT/etc/resolv.conf" 2>/dev/null || true

    mount_pseudo_filesystems
    log "installing Slurm, munge and MariaDB in the root"
    {
        in_root env DEBIAN_FRONTEND=noninteractive apt-get update &&
        in_root env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${PACKAGES[@]}" &&
        in_root apt-get clean
    } >"$DEVCLUSTER_DIR/apt.log" 2>&1 || die "package install failed, see $DEVCLUSTER_DIR/apt.log"
    # Package scripts must not have left anything running (policy-rc.d), but be sure.
    kill_processes_in_root
    touch "$BUILT_MARKER"
    log "root built in $(since "$t0") s ($(du -sh --one-file-system "$ROOT" | cut -f1))"
}

# ---------------------------------------------------------------------------
# Users, keys, directories, fake GPUs (idempotent)
# ---------------------------------------------------------------------------
prepare_root() {
    # slurmrestd refuses to run as root or as SlurmUser: a dedicated user.
    in_root id -u slurmrest >/dev/null 2>&1 ||
        in_root useradd --system --user-group --no-create-home --home-dir /nonexistent \
            --shell /usr/sbin/nologin slurmrest

    # Directories: one log dir per daemon user (munged refuses a shared one).
    mkdir -p "$ROOT$OUTLOG" "$ROOT/etc/slurm"
    install -d -m 0755 "$ROOT/run/slurm" "$ROOT/var/log/slurm" "$ROOT/var/spool/slurmctld" \
        "$ROOT/var/spool/slurmd"
    in_root chown slurm:slurm /run/slurm /var/log/slurm /var/spool/slurmctld
    local node
    for node in "${NODES[@]}"; do install -d -m 0755 "$ROOT/var/spool/slurmd/$node"; done
    install -d -m 0755 "$ROOT/run/munge" "$ROOT/var/lib/munge"
    install -d -m 0700 "$ROOT/var/log/munge"
    in_root chown munge:munge /run/munge /var/lib/munge /var/log/munge
    install -d -m 0755 "$ROOT/run/mysqld" "$ROOT/var/log/mysql"
    in_root chown mysql:mysql /run/mysqld /var/log/mysql
    mkdir -p "$ROOT$JOBS_DIR"
    chmod 1777 "$ROOT$JOBS_DIR"

    # munge key (the package normally creates it; make sure).
    if [[ ! -s "$ROOT/etc/munge/munge.key" ]]; then
        in_root mungekey --create --keyfile=/etc/munge/munge.key
    fi
    in_root chown munge:munge /etc/munge/munge.key
    chmod 600 "$ROOT/etc/munge/munge.key"

    # JWT key: 32 random bytes, created once. The portal reads it from the host.
    if [[ ! -s "$ROOT$JWT_KEY" ]]; then
        (umask 077; head -c 32 /dev/urandom >"$ROOT$JWT_KEY")
        log "created JWT key $ROOT$JWT_KEY"
    fi
    in_root chown slurm:slurm "$JWT_KEY"
    chmod 600 "$ROOT$JWT_KEY"

    # Password of slurmdbd's MariaDB user, created once.
    if [[ ! -s "$ROOT$DB_PASS_FILE" ]]; then
        (umask 077; head -c 18 /dev/urandom | base64 | tr -d '/+=\n' >"$ROOT$DB_PASS_FILE")
    fi
    chmod 600 "$ROOT$DB_PASS_FILE"

    # Fake GPUs must be character devices (plain files give an empty
    # CUDA_VISIBLE_DEVICES). c 1 3 is the same device as /dev/null.
    local i dev
    for node in "${NODES[@]}"; do
        mkdir -p "$ROOT/dev/fakegpu/$node"
        for ((i = 0; i < NODE_GPU_COUNT[$node]; i++)); do
            dev="$ROOT/dev/fakegpu/$node/nvidia$i"
            [[ -c "$dev" ]] || { rm -f "$dev"; mknod -m 666 "$dev" c 1 3; }
        done
    done
}

# ---------------------------------------------------------------------------
# Configuration (rewritten on every `up`; a change restarts what reads it)
# ---------------------------------------------------------------------------
slurm_conf() {
    local node type n port=$SLURMD_BASE_PORT tres="gres/gpu,gres/shard"
    local -A seen=()
    for node in "${NODES[@]}"; do
        type=${NODE_GPU_TYPE[$node]}
        [[ -n "${seen[$type]:-}" ]] || { tres+=",gres/gpu:$type"; seen[$type]=1; }
    done
    cat <<EOF
# Generated by deploy/devcluster/cluster.sh -- edit the script, not this file.
ClusterName=$CLUSTER_NAME
SlurmctldHost=localhost(127.0.0.1)
SlurmctldPort=$SLURMCTLD_PORT
SlurmdPort=$SLURMD_BASE_PORT
SlurmUser=slurm
SlurmdUser=root

AuthType=auth/munge
CredType=cred/munge
AuthAltTypes=auth/jwt
AuthAltParameters=jwt_key=$JWT_KEY

StateSaveLocation=/var/spool/slurmctld
SlurmdSpoolDir=/var/spool/slurmd/%n
SlurmctldPidFile=/run/slurm/slurmctld.pid
SlurmdPidFile=/run/slurm/slurmd-%n.pid
SlurmctldLogFile=/var/log/slurm/slurmctld.log
SlurmdLogFile=/var/log/slurm/slurmd-%n.log
SlurmctldDebug=info
SlurmdDebug=info

# No cgroups here: plain process tracking, no task containment.
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/linux
JobAcctGatherFrequency=30
MpiDefault=none
MailProg=/bin/true
# Emulated nodes claim more CPUs/memory than the host has.
SlurmdParameters=config_overrides
ReturnToService=2
# Finished jobs stay visible to the REST job list for 10 minutes.
MinJobAge=600

SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
# Without it a job takes the whole node's memory.
DefMemPerCPU=1000

PriorityType=priority/multifactor
PriorityWeightQOS=10000
PriorityWeightFairshare=2000
PriorityWeightAge=100
PriorityDecayHalfLife=7-0

AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=127.0.0.1
AccountingStoragePort=$SLURMDBD_PORT
# associations is mandatory: without it a token for an unknown user submits
# jobs that run as uid 99.
AccountingStorageEnforce=associations,limits,qos
AccountingStorageTRES=$tres

GresTypes=gpu,shard
EOF
    for node in "${NODES[@]}"; do
        type=${NODE_GPU_TYPE[$node]}
        n=${NODE_GPU_COUNT[$node]}
        echo "NodeName=$node NodeAddr=127.0.0.1 Port=$port CPUs=$NODE_CPUS RealMemory=$NODE_MEMORY_MB" \
             "Gres=gpu:$type:$n,shard:$type:$(( n * SHARDS_PER_GPU[$type] ))" \
             "Features=gpu_type:$type State=UNKNOWN"
        port=$((port + 1))
    done
    echo "PartitionName=gpu Nodes=ALL Default=YES MaxTime=7-00:00:00 DefaultTime=60 State=UP"
}

gres_conf() {
    local node type i
    echo "# Generated by deploy/devcluster/cluster.sh. Fake GPUs are char devices."
    echo "# One shard line per GPU, so a shard job is bound to one GPU's device."
    echo "AutoDetect=off"
    for node in "${NODES[@]}"; do
        type=${NODE_GPU_TYPE[$node]}
        for ((i = 0; i < NODE_GPU_COUNT[$node]; i++)); do
            echo "NodeName=$node Name=gpu Type=$type File=/dev/fakegpu/$node/nvidia$i"
        done
        for ((i = 0; i < NODE_GPU_COUNT[$node]; i++)); do
            echo "NodeName=$node Name=shard Type=$type Count=${SHARDS_PER_GPU[$type]} File=/dev/fakegpu/$node/nvidia$i"
        done
    done
}

slurmdbd_conf() {
    cat <<EOF
# Generated by deploy/devcluster/cluster.sh -- edit the script, not this file.
AuthType=auth/munge
AuthAltTypes=auth/jwt
AuthAltParameters=jwt_key=$JWT_KEY
DbdHost=localhost
DbdAddr=127.0.0.1
DbdPort=$SLURMDBD_PORT
SlurmUser=slurm
LogFile=/var/log/slurm/slurmdbd.log
PidFile=/run/slurm/slurmdbd.pid
DebugLevel=info
StorageType=accounting_storage/mysql
StorageHost=127.0.0.1
StoragePort=$MYSQL_PORT
StorageUser=slurm
StoragePass=$(cat "$ROOT$DB_PASS_FILE")
StorageLoc=slurm_acct_db
EOF
}

mysql_cnf() {
    cat <<EOF
# Generated by deploy/devcluster/cluster.sh: MariaDB private to the root, used
# only by slurmdbd. Read with --defaults-file, so the root's my.cnf is ignored.
[client]
socket=/run/mysqld/mysqld.sock
port=$MYSQL_PORT
[mysqld]
datadir=/var/lib/mysql
socket=/run/mysqld/mysqld.sock
pid-file=/run/mysqld/mysqld.pid
port=$MYSQL_PORT
bind-address=127.0.0.1
skip-name-resolve
log-error=/var/log/mysql/error.log
performance_schema=OFF
innodb_buffer_pool_size=64M
innodb_log_file_size=64M
innodb_flush_log_at_trx_commit=2
innodb_lock_wait_timeout=900
max_allowed_packet=16M
EOF
}

hosts_file() {
    printf '127.0.0.1\tlocalhost %s %s\n' "$(hostname)" "${NODES[*]}"
    printf '::1\t\tlocalhost ip6-localhost ip6-loopback\n'
}

nsswitch_conf() {
    cat <<'EOF'
passwd:         files
group:          files
shadow:         files
gshadow:        files
hosts:          files
networks:       files
protocols:      db files
services:       db files
ethers:         db files
rpc:            db files
EOF
}

write_configs() {
    CHANGED_FILES=()
    write_config /etc/slurm/slurm.conf   "$(slurm_conf)" 644
    write_config /etc/slurm/gres.conf    "$(gres_conf)"  644
    # slurmd insists on cgroups even with proctrack/linuxproc unless disabled.
    write_config /etc/slurm/cgroup.conf  "CgroupPlugin=disabled" 644
    write_config /etc/slurm/slurmdbd.conf "$(slurmdbd_conf)" 600 slurm:slurm
    write_config "$MYSQL_CNF"            "$(mysql_cnf)"  644
    # Every name the daemons look up is local. Without this the root asks the host's DNS
    # server, unreachable here, and about one RPC in ten stalls 5 s on the resolver timeout.
    write_config /etc/hosts "$(hosts_file)" 644
    write_config /etc/nsswitch.conf "$(nsswitch_conf)" 644
    ((${#CHANGED_FILES[@]})) || return 0
    log "config written: ${CHANGED_FILES[*]}"

    # Apply a change to running daemons by restarting the ones that read it
    # (scontrol reconfigure re-execs daemons in 24.11, which would lose our PIDs).
    local f restart_slurm=0 restart_dbd=0 restart_db=0
    for f in "${CHANGED_FILES[@]}"; do
        case "$f" in
            "$MYSQL_CNF") restart_db=1 ;;
            */slurmdbd.conf) restart_dbd=1 ;;
            *) restart_slurm=1 ;;
        esac
    done
    local -a to_stop=()
    if ((restart_slurm || restart_dbd || restart_db)); then
        to_stop+=(slurmrestd "${NODES[@]/#/slurmd-}" slurmctld)
    fi
    ((restart_dbd || restart_db)) && to_stop+=(slurmdbd)
    ((restart_db)) && to_stop+=(mariadb)
    local name any=0
    for name in "${to_stop[@]}"; do is_running "$name" && any=1; done
    if ((any)); then
        log "configuration changed: restarting ${to_stop[*]}"
        stop_daemons slurmrestd "${NODES[@]/#/slurmd-}"
        stop_daemons slurmctld
        ((restart_dbd || restart_db)) && stop_daemons slurmdbd
        ((restart_db)) && stop_daemons mariadb
    fi
    return 0
}

# ---------------------------------------------------------------------------
# Daemons, in dependency order
# ---------------------------------------------------------------------------
# shellcheck disable=SC2120  # arguments come through wait_for's "$@"
mysql_cli() { in_root mariadb --defaults-file="$MYSQL_CNF" -uroot "$@"; }

start_munged() {
    if ! is_running munged; then
        # A socket left by an unclean stop would make munged refuse to start.
        rm -f "$ROOT/run/munge/munge.socket.2" "$ROOT/run/munge/munge.socket.2.lock" "$ROOT/run/munge/munged.pid"
    fi
    start_daemon munged munge:munge -- /usr/sbin/munged --foreground
    wait_for "munged socket" "$READY_TIMEOUT" munged test -S "$ROOT/run/munge/munge.socket.2" || die_with_log munged /var/log/munge/munged.log
}

start_mariadb() {
    if [[ ! -d "$ROOT/var/lib/mysql/mysql" ]]; then
        log "initialising the MariaDB data directory"
        in_root mariadb-install-db --defaults-file="$MYSQL_CNF" --user=mysql --skip-test-db \
            --auth-root-authentication-method=socket >"$ROOT$OUTLOG/mariadb-install-db.out" 2>&1
    fi
    start_daemon mariadb mysql:mysql -- /usr/sbin/mariadbd --defaults-file="$MYSQL_CNF"
    wait_for "MariaDB" "$READY_TIMEOUT" mariadb mysql_cli -e 'SELECT 1' || die_with_log mariadb /var/log/mysql/error.log
    # The database must exist before slurmdbd's first start: with trixie's
    # libmariadb 3.4.10 slurmdbd otherwise dies ("5027 Number of columns ...",
    # _check_mysql_concat_is_sane) after its own CREATE DATABASE connection.
    local pass; pass=$(cat "$ROOT$DB_PASS_FILE")
    mysql_cli <<EOF
CREATE DATABASE IF NOT EXISTS slurm_acct_db;
CREATE USER IF NOT EXISTS 'slurm'@'127.0.0.1' IDENTIFIED BY '$pass';
CREATE USER IF NOT EXISTS 'slurm'@'localhost' IDENTIFIED BY '$pass';
ALTER USER 'slurm'@'127.0.0.1' IDENTIFIED BY '$pass';
ALTER USER 'slurm'@'localhost' IDENTIFIED BY '$pass';
GRANT ALL ON slurm_acct_db.* TO 'slurm'@'127.0.0.1';
GRANT ALL ON slurm_acct_db.* TO 'slurm'@'localhost';
EOF
}

start_slurmdbd() {
    start_daemon slurmdbd slurm:slurm -- /usr/sbin/slurmdbd -D
    wait_for "slurmdbd on port $SLURMDBD_PORT" "$READY_TIMEOUT" slurmdbd port_listening "$SLURMDBD_PORT" \
        || die_with_log slurmdbd /var/log/slurm/slurmdbd.log
}

start_slurmctld() {
    start_daemon slurmctld slurm:slurm -- /usr/sbin/slurmctld -D
    wait_for "slurmctld on port $SLURMCTLD_PORT" "$READY_TIMEOUT" slurmctld port_listening "$SLURMCTLD_PORT" \
        || die_with_log slurmctld /var/log/slurm/slurmctld.log
}

start_slurmds() {
    local node
    for node in "${NODES[@]}"; do
        start_daemon "slurmd-$node" "" -- /usr/sbin/slurmd -D -N "$node"
    done
}

# slurmrestd: JWT only, SLURM_JWT=daemon in its environment alone, on 127.0.0.1.
start_slurmrestd() {
    start_daemon slurmrestd slurmrest:slurmrest SLURM_JWT=daemon -- \
        /usr/sbin/slurmrestd -a rest_auth/jwt "$REST_ADDR:$REST_PORT"
}

die_with_log() {
    local name="$1" logfile="$2"
    log "$name did not come up; last lines of $ROOT$logfile and $ROOT$OUTLOG/$name.out:"
    tail -n 20 "$ROOT$logfile" "$ROOT$OUTLOG/$name.out" 2>/dev/null >&3 || true
    exit 1
}

# ---------------------------------------------------------------------------
# JWT + REST probe (python3 stdlib on the host)
# ---------------------------------------------------------------------------
mint_token() {  # mint_token USER [LIFETIME_SECONDS]
    [[ -n "$PYTHON" ]] || die "python3 is needed on the host to mint JWTs"
    "$PYTHON" - "$ROOT$JWT_KEY" "$1" "${2:-3600}" <<'EOF'
import base64, hashlib, hmac, json, sys, time
key = open(sys.argv[1], "rb").read()
b64 = lambda b: base64.urlsafe_b64encode(b).rstrip(b"=")
now = int(time.time())
head = b64(json.dumps({"alg": "HS256", "typ": "JWT"}).encode())
body = b64(json.dumps({"exp": now + int(sys.argv[3]), "iat": now, "sun": sys.argv[2]}).encode())
sig = b64(hmac.new(key, head + b"." + body, hashlib.sha256).digest())
print((head + b"." + body + b"." + sig).decode())
EOF
}

# An authenticated request (never /ping: it answers 200 even with a bad token).
rest_ready() {
    local token; token=$(mint_token slurm 300)
    "$PYTHON" - "http://$REST_ADDR:$REST_PORT/slurm/v0.0.41/partitions" "$token" <<'EOF'
import json, sys, urllib.request
req = urllib.request.Request(sys.argv[1], headers={
    "X-SLURM-USER-NAME": "slurm", "X-SLURM-USER-TOKEN": sys.argv[2]})
with urllib.request.urlopen(req, timeout=5) as r:
    doc = json.load(r)
sys.exit(1 if doc.get("errors") or not doc.get("partitions") else 0)
EOF
}

# ---------------------------------------------------------------------------
# Nodes: wait until every node is up; resume nodes that came back DOWN
# ---------------------------------------------------------------------------
# A node is ready when slurmctld has it responding and not DOWN, and -- for a
# slurmd this run started -- slurmd has registered since (SlurmdStartTime):
# after a restart slurmctld restores the old IDLE state before slurmd is back.
nodes_ready() {
    local out line name state started node bad=0
    for node in "${NODES[@]}"; do
        is_running "slurmd-$node" || die_with_log "slurmd-$node" "/var/log/slurm/slurmd-$node.log"
    done
    # TZ=UTC on both sides: the root's and the host's time zones may differ.
    out=$(timeout 10 chroot "$ROOT" env TZ=UTC scontrol -o show node) || return 1
    local -A seen=()
    while read -r line; do
        name=$(sed -n 's/^NodeName=\([^ ]*\).*/\1/p' <<<"$line")
        [[ -n "$name" ]] || continue
        state=$(sed -n 's/.* State=\([^ ]*\).*/\1/p' <<<"$line")
        started=$(sed -n 's/.* SlurmdStartTime=\([^ ]*\).*/\1/p' <<<"$line")
        seen[$name]=1
        case "+$state+" in
            *+NOT_RESPONDING+*|*+UNKNOWN+*|*+FUTURE+*|*+INVALID_REG+*|*POWER*|*REBOOT*)
                bad=1; continue ;;
            +DOWN+*)
                # Responding but DOWN (e.g. "Node unexpectedly rebooted"): resume.
                if [[ -z "${RESUMED[$name]:-}" ]]; then
                    log "node $name is $state: resuming it"
                    timeout 10 chroot "$ROOT" scontrol update NodeName="$name" State=RESUME || true
                    RESUMED[$name]=1
                fi
                bad=1; continue ;;
        esac
        if [[ " ${STARTED[*]} " == *" slurmd-$name "* ]]; then
            [[ "$started" != None && -n "$started" ]] &&
                (( $(TZ=UTC date -d "$started" +%s) >= UP_STARTED_AT )) || bad=1
        fi
    done <<<"$out"
    for node in "${NODES[@]}"; do [[ -n "${seen[$node]:-}" ]] || bad=1; done
    ((bad == 0))
}
declare -A RESUMED=()

# ---------------------------------------------------------------------------
# Accounting (idempotent): cluster, QOS, account `portal`
# ---------------------------------------------------------------------------
sacctmgr_q() { timeout 30 chroot "$ROOT" sacctmgr -n -P "$@"; }

setup_accounting() {
    local changed=0
    have=$(sacctmgr_q show cluster format=cluster)
    if ! grep -qx "$CLUSTER_NAME" <<<"$have"; then
        in_root sacctmgr -i add cluster "$CLUSTER_NAME" >/dev/null; changed=1
    fi
    local qos prio have
    local -A want=([free]=1000 [pro]=5000 [premium]=10000)
    for qos in free pro premium; do
        prio=${want[$qos]}
        have=$(sacctmgr_q show qos where name="$qos" format=priority)
        if [[ -z "$have" ]]; then
            in_root sacctmgr -i add qos "$qos" priority="$prio" >/dev/null; changed=1
        elif [[ "$have" != "$prio" ]]; then
            in_root sacctmgr -i modify qos where name="$qos" set priority="$prio" >/dev/null; changed=1
        fi
    done
    # The account's own association (user field empty).
    have=$(sacctmgr_q show assoc where cluster="$CLUSTER_NAME" account=portal format=user,qos,defaultqos |
           awk -F'|' '$1 == "" && !done { print $2 "|" $3; done = 1 }')
    if [[ -z "$have" ]]; then
        in_root sacctmgr -i add account portal cluster="$CLUSTER_NAME" \
            description="GPU pool portal users" organization=gpupool \
            qos=free,pro,premium defaultqos=free >/dev/null
        changed=1
    elif [[ "$(tr ',' '\n' <<<"${have%%|*}" | sort | paste -sd,)|${have#*|}" != "free,premium,pro|free" ]]; then
        in_root sacctmgr -i modify account where name=portal cluster="$CLUSTER_NAME" \
            set qos=free,pro,premium defaultqos=free >/dev/null
        changed=1
    fi
    ((changed)) && log "accounting set up: cluster $CLUSTER_NAME, QOS free/pro/premium, account portal"
    return 0
}

# ---------------------------------------------------------------------------
# Subcommands
# ---------------------------------------------------------------------------
all_daemons() { echo munged mariadb slurmdbd slurmctld "${NODES[@]/#/slurmd-}" slurmrestd; }

UP_STARTED_AT=0
cmd_up() {
    local t0; t0=$(now)
    UP_STARTED_AT=$(( $(date +%s) - 1 ))
    mkdir -p "$DEVCLUSTER_DIR" "$PIDDIR"
    build_root
    mount_pseudo_filesystems
    prepare_root
    write_configs

    start_munged
    start_mariadb
    start_slurmdbd
    # Before slurmctld, so it loads the associations on its first start.
    setup_accounting
    start_slurmctld
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
Slurm devcluster '$CLUSTER_NAME' is up.
  root:        $ROOT
  clients:     chroot $ROOT sinfo | scontrol | sacctmgr | sbatch ...
  REST:        http://$REST_ADDR:$REST_PORT/slurm/v0.0.41/  (JWT, X-SLURM-USER-NAME / X-SLURM-USER-TOKEN)
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
        stop_daemons slurmrestd
        stop_daemons "${NODES[@]/#/slurmd-}"
        stop_daemons slurmctld
        stop_daemons slurmdbd
        stop_daemons mariadb
        stop_daemons munged
    fi
    if [[ -d "$ROOT" ]]; then
        kill_processes_in_root      # job steps, anything else chrooted in
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
    sed -n '2,9p' "$0" | sed 's/^# \{0,1\}//'
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
