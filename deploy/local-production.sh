#!/usr/bin/env bash
# The production shape on this machine, for rehearsals: nginx (TLS) in front of two web
# processes (gpupool/serve.py), two Celery workers and one beat, on a PostgreSQL cluster and a Redis of
# its own (never the shared ones on 5432 and 6379), against the dev Slurm cluster that is
# already running (SLURM_RELEASE, default 24.11). The same process definitions as
# deploy/systemd/ and the same proxy configuration as deploy/nginx/, without systemd: each
# process is started in the background with its PID in $RUN/run/<name>.pid and stopped by it.
#
#   deploy/local-production.sh up        # start everything missing; prints the URL
#   deploy/local-production.sh status    # each process: running or not, its PID
#   deploy/local-production.sh start NAME | stop NAME   # one process (redis, postgres, web1,
#                                        # web2, worker1, worker2, beat, nginx)
#   deploy/local-production.sh down      # stop everything it started (data kept)
#   deploy/local-production.sh purge     # down, then delete $RUN
#
# Settings: LOCAL_PRODUCTION_DIR (default var/production), the ports below, EXTRA_ENV (a file
# of NAME=value lines appended to the environment, e.g. bench/fault_rehearsal.py's).
set -euo pipefail
cd "$(dirname "$0")/.."
REPO=$(pwd)
RUN=$(realpath -m "${LOCAL_PRODUCTION_DIR:-var/production}")
HTTP_PORT=${HTTP_PORT:-28080}
HTTPS_PORT=${HTTPS_PORT:-28443}
WEB_PORTS=(${WEB1_PORT:-28101} ${WEB2_PORT:-28102})
REDIS_PORT=${REDIS_PORT:-28379}
PG_PORT=${PG_PORT:-28432}
PY=$REPO/.venv/bin/python
PGBIN=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -n 1)
PIDS=$RUN/run
LOGS=$RUN/log
PGDATA=$RUN/pg/data
PGSOCK=$RUN/pg/socket
NAMES=(redis postgres web1 web2 worker1 worker2 beat nginx)

pid_of() { [[ -s $PIDS/$1.pid ]] && cat "$PIDS/$1.pid" || true; }
alive() { local pid; pid=$(pid_of "$1"); [[ -n $pid ]] && kill -0 "$pid" 2>/dev/null; }

wait_for() {  # wait_for <seconds> <what> <command...>
  local seconds=$1 what=$2; shift 2
  local deadline=$((SECONDS + seconds))
  until "$@" >/dev/null 2>&1; do
    if ((SECONDS >= deadline)); then echo "$what did not come up; see $LOGS" >&2; return 1; fi
    sleep 0.2
  done
}

port_free() { ! ss -Hltn "sport = :$1" | grep -q .; }

secret() {  # secret <file>: a random secret kept in $RUN (mode 600)
  if [[ ! -s $RUN/secrets/$1 ]]; then
    mkdir -p "$RUN/secrets"; chmod 700 "$RUN/secrets"
    (umask 077; openssl rand -hex 24 >"$RUN/secrets/$1")
  fi
  cat "$RUN/secrets/$1"
}

write_env() {
  local redis_password pg_password
  redis_password=$(secret redis_password)
  pg_password=$(secret pg_password)
  secret secret_key >/dev/null
  # deploy/production.env.example with this machine's addresses; TLS by a self-signed certificate.
  cat >"$RUN/production.env" <<ENV
DEBUG=0
SECRET_KEY_FILE=$RUN/secrets/secret_key
ALLOWED_HOSTS=127.0.0.1,localhost
CSRF_TRUSTED_ORIGINS=https://127.0.0.1:$HTTPS_PORT,https://localhost:$HTTPS_PORT
SITE_URL=https://127.0.0.1:$HTTPS_PORT
SECURE_PROXY_SSL_HEADER=HTTP_X_FORWARDED_PROTO
SECURE_SSL_REDIRECT=1
TRUSTED_PROXY_COUNT=1
DATABASE_URL=postgres://gpupool:$pg_password@127.0.0.1:$PG_PORT/gpupool
REDIS_URL=redis://:$redis_password@127.0.0.1:$REDIS_PORT/0
GPUPOOL_VAR_DIR=$RUN/var
GPUPOOL_ENV_FILE=
SLURM_RELEASE=${SLURM_RELEASE:-24.11}
HTTP_THREADS=8
ENV
  if [[ -n ${EXTRA_ENV:-} ]]; then
    grep -E '^[A-Z_][A-Z0-9_]*=' "$EXTRA_ENV" >>"$RUN/production.env"
  fi
}

load_env() {  # export every NAME=value line (values may hold spaces, as systemd allows)
  while IFS= read -r line; do export "${line?}"; done < <(grep -E '^[A-Z_][A-Z0-9_]*=' "$RUN/production.env")
}

launch() {  # launch <name> <command...>: in the background, its own session, PID recorded
  local name=$1; shift
  setsid "$@" >>"$LOGS/$name.log" 2>&1 </dev/null &
  echo $! >"$PIDS/$name.pid"
}

# The portal's own processes are restarted when they exit, as systemd's Restart=always does for
# deploy/systemd/'s units: a Celery worker exits for good on some losses of its broker ("Unrecoverable
# error" when Redis restarts while it restores a message; bench/fault_rehearsal.py met it). The PID
# recorded is the supervising shell's; TERM stops it and its process, and killing its process group
# (its own session) kills both, as a crash of the host would.
SUPERVISE='trap "kill -TERM \$child 2>/dev/null; wait \$child; exit 0" TERM INT
while :; do "$@" & child=$!; wait $child; rc=$?; echo "$(date -Is) exited with $rc; restarting in 1 s"; sleep 1; done'

supervised() {  # supervised <name> <command...>
  local name=$1; shift
  launch "$name" bash -c "$SUPERVISE" supervise "$@"
}

start_redis() {
  mkdir -p "$RUN/redis"
  # No snapshots, no append-only file: the harshest case, a restart loses everything in Redis
  # (queued tasks, locks, live-event groups, rate counters). Production: see docs/operations.md.
  launch redis redis-server --bind 127.0.0.1 --port "$REDIS_PORT" --requirepass "$(secret redis_password)" \
    --save "" --appendonly no --dir "$RUN/redis" --daemonize no
  wait_for 20 redis redis-cli -h 127.0.0.1 -p "$REDIS_PORT" --no-auth-warning -a "$(secret redis_password)" ping
}

pg() { runuser -u postgres -- "$PGBIN/$1" "${@:2}"; }

start_postgres() {
  mkdir -p "$PGDATA" "$PGSOCK"
  chown postgres: "$RUN/pg" "$PGDATA" "$PGSOCK"
  chmod 700 "$PGDATA"
  touch "$LOGS/postgres.log" && chown postgres: "$LOGS/postgres.log"
  if [[ ! -s $PGDATA/PG_VERSION ]]; then
    pg initdb -D "$PGDATA" -U postgres --auth-local=peer --auth-host=scram-sha-256 >>"$LOGS/postgres.log"
  fi
  # A postmaster killed with SIGKILL leaves its backends a moment; a new one waits for them.
  local old; old=$(pid_of postgres)
  if [[ -n $old ]]; then wait_for 20 "the old postgres backends' exit" bash -c "! pgrep -P $old"; fi
  pg pg_ctl -D "$PGDATA" -l "$LOGS/postgres.log" -w -t 60 \
    -o "-p $PG_PORT -k $PGSOCK -c listen_addresses=127.0.0.1 -c max_connections=200" start >/dev/null
  head -n 1 "$PGDATA/postmaster.pid" >"$PIDS/postgres.pid"
  wait_for 30 postgres pg pg_isready -h "$PGSOCK" -p "$PG_PORT" -q
  local password; password=$(secret pg_password)
  if ! pg psql -h "$PGSOCK" -p "$PG_PORT" -qtAc "SELECT 1 FROM pg_roles WHERE rolname='gpupool'" | grep -q 1; then
    pg psql -h "$PGSOCK" -p "$PG_PORT" -qc "CREATE ROLE gpupool LOGIN CREATEDB PASSWORD '$password'"
    pg psql -h "$PGSOCK" -p "$PG_PORT" -qc "CREATE DATABASE gpupool OWNER gpupool"
  fi
}

start_web() {  # start_web <n>
  local port=${WEB_PORTS[$1 - 1]}
  supervised "web$1" "$PY" -m gpupool.serve --host 127.0.0.1 --port "$port"
  wait_for 60 "web$1" curl -fsS "http://127.0.0.1:$port/readyz"
}

start_worker() {  # start_worker <n>
  supervised "worker$1" "$REPO/.venv/bin/celery" -A gpupool worker --loglevel=INFO --concurrency=2 \
    --without-gossip --without-mingle -n "worker$1@%h"
}

start_beat() {
  supervised beat "$REPO/.venv/bin/celery" -A gpupool beat --loglevel=INFO --schedule "$RUN/var/celerybeat-schedule"
}

write_nginx_conf() {
  mkdir -p "$RUN/nginx"
  if [[ ! -s $RUN/tls/cert.pem ]]; then
    mkdir -p "$RUN/tls"
    openssl req -x509 -newkey rsa:2048 -nodes -days 30 -subj "/CN=127.0.0.1" \
      -addext "subjectAltName=IP:127.0.0.1,DNS:localhost" \
      -keyout "$RUN/tls/key.pem" -out "$RUN/tls/cert.pem" 2>/dev/null
    chmod 600 "$RUN/tls/key.pem"
  fi
  # deploy/nginx/gpupool.conf's shape: the same TLS settings and locations, included as they are.
  cat >"$RUN/nginx/nginx.conf" <<CONF
worker_processes 1;
daemon off;
pid $PIDS/nginx.master.pid;
error_log $LOGS/nginx-error.log warn;
# Each open page's socket is two connections here (the browser's and the web process's).
worker_rlimit_nofile 20000;
events { worker_connections 8192; }
http {
    include /etc/nginx/mime.types;
    default_type application/octet-stream;
    access_log $LOGS/nginx-access.log;
    client_body_temp_path $RUN/nginx/body;
    proxy_temp_path $RUN/nginx/proxy;
    fastcgi_temp_path $RUN/nginx/fastcgi;
    uwsgi_temp_path $RUN/nginx/uwsgi;
    scgi_temp_path $RUN/nginx/scgi;
    upstream gpupool_web {
        server 127.0.0.1:${WEB_PORTS[0]} max_fails=1 fail_timeout=5s;
        server 127.0.0.1:${WEB_PORTS[1]} max_fails=1 fail_timeout=5s;
        keepalive 16;
    }
    include $REPO/deploy/nginx/gpupool-maps.conf;
    server {
        listen 127.0.0.1:$HTTP_PORT;
        return 301 https://\$host:$HTTPS_PORT\$request_uri;
    }
    server {
        listen 127.0.0.1:$HTTPS_PORT ssl http2;
        ssl_certificate $RUN/tls/cert.pem;
        ssl_certificate_key $RUN/tls/key.pem;
        include $REPO/deploy/nginx/gpupool-tls.conf;
        location /static/ {
            alias $RUN/var/staticfiles/;
            include $REPO/deploy/nginx/gpupool-static.conf;
        }
        include $REPO/deploy/nginx/gpupool-proxy.conf;
    }
}
CONF
  nginx -t -q -c "$RUN/nginx/nginx.conf"
}

start_nginx() {
  write_nginx_conf
  launch nginx nginx -c "$RUN/nginx/nginx.conf"
  wait_for 20 nginx curl -fsS --cacert "$RUN/tls/cert.pem" "https://127.0.0.1:$HTTPS_PORT/healthz"
}

start_one() {
  local name=$1
  if alive "$name"; then return 0; fi
  case $name in
    redis) start_redis ;;
    postgres) start_postgres ;;
    web1 | web2) start_web "${name#web}" ;;
    worker1 | worker2) start_worker "${name#worker}" ;;
    beat) start_beat ;;
    nginx) start_nginx ;;
    *) echo "unknown process $name (one of: ${NAMES[*]})" >&2; return 2 ;;
  esac
  echo "started $name (pid $(pid_of "$name"))"
}

stop_one() {  # TERM, then KILL after 20 s; only the PID this script recorded
  local name=$1 pid
  pid=$(pid_of "$name")
  if [[ -z $pid ]] || ! kill -0 "$pid" 2>/dev/null; then rm -f "$PIDS/$name.pid"; return 0; fi
  if [[ $name == postgres ]]; then
    pg pg_ctl -D "$PGDATA" -m fast -w stop >/dev/null || kill -TERM "$pid"
  else
    kill -TERM "$pid"
  fi
  for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
  if kill -0 "$pid" 2>/dev/null; then kill -KILL "$pid"; fi
  rm -f "$PIDS/$name.pid"
  echo "stopped $name (pid $pid)"
}

up() {
  mkdir -p "$PIDS" "$LOGS" "$RUN/var"
  local name port
  declare -A owner=([$HTTP_PORT]=nginx [$HTTPS_PORT]=nginx [${WEB_PORTS[0]}]=web1 [${WEB_PORTS[1]}]=web2
    [$REDIS_PORT]=redis [$PG_PORT]=postgres)
  for port in "${!owner[@]}"; do
    if ! alive "${owner[$port]}" && ! port_free "$port"; then
      echo "port $port is taken by another program; choose another (the variables at the top of $0)" >&2
      exit 1
    fi
  done
  write_env
  start_one redis
  start_one postgres
  load_env
  "$PY" manage.py migrate --noinput >>"$LOGS/migrate.log"
  "$PY" manage.py collectstatic --noinput >>"$LOGS/migrate.log"
  for name in web1 web2 worker1 worker2 beat nginx; do start_one "$name"; done
  echo "portal: https://127.0.0.1:$HTTPS_PORT (self-signed: --cacert $RUN/tls/cert.pem); logs in $LOGS"
}

down() {
  local index
  for ((index = ${#NAMES[@]} - 1; index >= 0; index--)); do stop_one "${NAMES[index]}"; done
}

status() {
  local name
  for name in "${NAMES[@]}"; do
    if alive "$name"; then echo "$name: running (pid $(pid_of "$name"))"; else echo "$name: stopped"; fi
  done
}

case ${1:-} in
  up) up ;;
  down) down ;;
  purge) down; rm -rf "$RUN" ;;
  status) status ;;
  start) [[ -s $RUN/production.env ]] || write_env; load_env; start_one "${2:?which process}" ;;
  stop) stop_one "${2:?which process}" ;;
  env) echo "$RUN/production.env" ;;
  *) sed -n '2,17p' "$0"; exit 2 ;;
esac
