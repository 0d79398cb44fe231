# deploy/devcluster/lib/daemons.sh -- sourced by cluster.sh, not run on its own.
# Starting the daemons in order, the JWT/REST probe, node readiness, accounting setup.
# shellcheck shell=bash

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

# Sends what slurmctld's event hook spools to the portal (deploy/slurm-events/).
start_event_forwarder() {
    start_daemon event-forwarder slurm:slurm -- "$EVENT_FORWARDER"
}

start_slurmds() {
    local node
    power_up_nodes
    for node in "${NODES[@]}"; do
        is_running "slurmd-$node" || adopt_slurmd "$node" ||
            DAEMON_NETNS=$(node_netns) start_daemon "slurmd-$node" "" -- /usr/sbin/slurmd -D -N "$node"
    done
}

# A node that power saving stopped and started again (deploy/devcluster/power/) runs a slurmd
# this script did not start: its own pid file in the root (SlurmdPidFile) says which.
adopt_slurmd() {
    local node=$1 pid
    pid=$(head -c 20 "$ROOT/run/slurm/slurmd-$node.pid" 2>/dev/null) || return 1
    pid_alive "$pid" || return 1
    case "$(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null)" in
        "/usr/sbin/slurmd -D -N $node " | "/usr/sbin/slurmd -D -b -N $node ") ;;
        *) return 1 ;;
    esac
    echo "$pid" >"$PIDDIR/slurmd-$node.pid"
    log "slurmd-$node runs already (pid $pid, started by power saving)"
}

# Nodes that slurmctld remembers as powered down (or going down) are powered up through Slurm,
# so its idea of them and their slurmds agree; `up` means every node up.
power_up_nodes() {
    local down node waited
    down=$(timeout 10 chroot "$ROOT" sinfo -h -N -t POWERED_DOWN,POWERING_DOWN,POWER_DOWN -o '%N' 2>/dev/null |
           sort -u | paste -sd, -) || return 0
    [[ -n "$down" ]] || return 0
    log "powering up $down (power saving had them down)"
    timeout 10 chroot "$ROOT" scontrol update NodeName="$down" State=POWER_UP || return 0
    for node in ${down//,/ }; do
        waited=0
        until adopt_slurmd "$node" || ((waited++ >= 60)); do sleep 0.5; done
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
    "$PYTHON" - "http://$REST_ADDR:$REST_PORT/slurm/$REST_PROBE_VERSION/partitions" "$token" <<'EOF'
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
# Accounting (idempotent): cluster and account `portal`. The QOS are the portal's plans:
# `manage.py slurm_limits --sync` (run by `make dev` and the test suite) creates them with
# their limits, so their names and priorities live in one place (the plan catalogue).
# ---------------------------------------------------------------------------
sacctmgr_q() { timeout 30 chroot "$ROOT" sacctmgr -n -P "$@"; }

setup_accounting() {
    local changed=0 have
    have=$(sacctmgr_q show cluster format=cluster)
    if ! grep -qx "$CLUSTER_NAME" <<<"$have"; then
        in_root sacctmgr -i add cluster "$CLUSTER_NAME" >/dev/null; changed=1
    fi
    # The account's own association (user field empty); users get their plan's QOS.
    have=$(sacctmgr_q show assoc where cluster="$CLUSTER_NAME" account=portal format=user |
           awk -F'|' '$1 == "" { print "yes"; exit }')
    if [[ -z "$have" ]]; then
        in_root sacctmgr -i add account portal cluster="$CLUSTER_NAME" \
            description="GPU pool portal users" organization=gpupool >/dev/null
        changed=1
    fi
    # The free plan's floor partition's QOS (lib/configs.sh): it must exist before slurmctld
    # reads slurm.conf (cap_floor_qos gives it its cap once slurmctld has started).
    if ! sacctmgr_q show qos where name=floor format=name | grep -qx floor; then
        in_root sacctmgr -i add qos floor >/dev/null; changed=1
    fi
    ((changed)) && log "accounting set up: cluster $CLUSTER_NAME, account portal, QOS floor"
    return 0
}

# The floor's cap, GrpTRES on a typed GPU: slurmdbd knows the TRES gres/gpu:<type> only once
# slurmctld has registered its AccountingStorageTRES, so on a fresh database this waits for it
# (setting it before failed with "no TRES known by type"); slurmctld takes the change live.
cap_floor_qos() {
    local floor_tres="gres/gpu:$FREE_FLOOR_GPU_TYPE=$FREE_FLOOR_GPUS" have tries=0
    have=$(sacctmgr_q show qos where name=floor format=grptres)
    [[ "$have" == "$floor_tres" ]] && return 0
    until sacctmgr_q show tres format=type,name | grep -qx "gres|gpu:$FREE_FLOOR_GPU_TYPE"; do
        ((++tries > 60)) && die "slurmdbd never learned the TRES gres/gpu:$FREE_FLOOR_GPU_TYPE"
        sleep 0.5
    done
    in_root sacctmgr -i modify qos where name=floor set GrpTRES="$floor_tres" >/dev/null
    log "QOS floor capped at $floor_tres"
}
