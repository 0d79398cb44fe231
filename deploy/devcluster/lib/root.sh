# deploy/devcluster/lib/root.sh -- sourced by cluster.sh, not run on its own.
# The Debian root: mounts, debootstrap, packages, users, keys, fake GPU devices.
# shellcheck shell=bash

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
    log "debootstrap --variant=minbase $SUITE from $mirror ${DEBOOTSTRAP_SCRIPT:+with $DEBOOTSTRAP_SCRIPT }(takes ~30 s)"
    mkdir -p "$ROOT"
    # A suite newer than the host's debootstrap (forky on Debian 12) is built with another
    # suite's script as the 4th argument.
    local -a script=()
    [[ -n "$DEBOOTSTRAP_SCRIPT" ]] && script=("$DEBOOTSTRAP_SCRIPT")
    debootstrap --variant=minbase "$SUITE" "$ROOT" "$mirror" "${script[@]}" >"$DEVCLUSTER_DIR/debootstrap.log" 2>&1 \
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
    # The suite follows Debian, not us: refuse a root whose Slurm is not the release asked for.
    local version; version=$(installed_slurm_version)
    [[ "$version" == "$SLURM_RELEASE".* ]] ||
        die "$SUITE ships Slurm $version, not $SLURM_RELEASE: set DEVCLUSTER_SUITE or DEBIAN_MIRROR (a snapshot)"
    touch "$BUILT_MARKER"
    log "root built in $(since "$t0") s ($(du -sh --one-file-system "$ROOT" | cut -f1), Slurm $version)"
}

# The Slurm version installed in the root, e.g. 26.05.5 (from the Debian package version).
installed_slurm_version() {
    in_root dpkg-query -W -f '${Version}' slurmctld 2>/dev/null | sed 's/-[^-]*$//; s/^[0-9]*://'
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
