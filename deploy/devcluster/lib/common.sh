# deploy/devcluster/lib/common.sh -- sourced by cluster.sh, not run on its own.
# Helpers shared by every part: logging, polling, config writes, daemon bookkeeping.
# shellcheck shell=bash

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
# here), and its root is our root (guards against a recycled PID): chrooted into it, or a job
# step pivoted into it (lib/containers.sh), whose root reads as "/" but is the same directory.
pid_alive() {
    local pid="$1" state
    [[ -n "$pid" && -r "/proc/$pid/status" ]] || return 1
    state=$(awk '/^State:/ { print $2 }' "/proc/$pid/status" 2>/dev/null) || return 1
    [[ -n "$state" && "$state" != Z && "$state" != X ]] || return 1
    [[ "$(readlink "/proc/$pid/root" 2>/dev/null)" == "$ROOT" || "/proc/$pid/root/" -ef "$ROOT/" ]]
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
    local -a chroot_args=() net_args=()
    [[ -n "$userspec" ]] && chroot_args=(--userspec="$userspec")
    # DAEMON_NETNS=<name>: started in that network namespace (nsenter execs: $! stays the daemon).
    [[ -n "${DAEMON_NETNS:-}" ]] && net_args=(nsenter --net="/run/netns/$DAEMON_NETNS" --)
    "${net_args[@]}" setsid chroot "${chroot_args[@]}" "$ROOT" \
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
