#!/usr/bin/env bash
# Make sure Redis and PostgreSQL answer on 127.0.0.1; start them where they do not.
# Neither is stopped afterwards: they may be shared with other software on this machine.
set -euo pipefail

REDIS_PORT=${REDIS_PORT:-6379}
PG_ROLE=${PG_ROLE:-gpupool}
PG_PASSWORD=${PG_PASSWORD:-gpupool}

wait_for() {  # wait_for <what> <command...>: poll up to 20 s
  local what=$1; shift
  for _ in $(seq 1 100); do "$@" >/dev/null 2>&1 && return 0; sleep 0.2; done
  echo "$what did not come up" >&2; return 1
}

if ! redis-cli -h 127.0.0.1 -p "$REDIS_PORT" ping >/dev/null 2>&1; then
  echo "starting redis on 127.0.0.1:$REDIS_PORT"
  mkdir -p /var/lib/redis /var/log/redis
  redis-server --daemonize yes --bind 127.0.0.1 --port "$REDIS_PORT" --save "" --appendonly no \
    --dir /var/lib/redis --logfile /var/log/redis/gpupool.log
  wait_for redis redis-cli -h 127.0.0.1 -p "$REDIS_PORT" ping
fi

if [[ ${1:-} == --postgres ]]; then
  if ! pg_isready -h 127.0.0.1 -p 5432 -q; then
    echo "starting postgresql"
    version=$(ls /etc/postgresql | sort -V | tail -n 1)
    pg_ctlcluster --skip-systemctl-redirect "$version" main start
    wait_for postgresql pg_isready -h 127.0.0.1 -p 5432 -q
  fi
  # A password role works whether the server trusts local TCP or asks for scram/md5.
  runuser -u postgres -- psql -qtAc "SELECT 1 FROM pg_roles WHERE rolname='$PG_ROLE'" | grep -q 1 ||
    runuser -u postgres -- psql -qc "CREATE ROLE $PG_ROLE LOGIN SUPERUSER PASSWORD '$PG_PASSWORD'"
fi
