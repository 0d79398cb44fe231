"""Start the stock `slurm-web` command, run by the peer's own venv python (bench/peer/setup.sh),
on a chosen Redis database.

    $SLURMWEB_PEER_DIR/venv/bin/python bench/peer/agent_launcher.py agent --conf-defs ... --conf ...

Slurm-web 6.0's cache (slurmweb/cache.py) calls redis.Redis(host, port, password): its
settings have no database number, so it always uses database 0. The benchmark's rule
is database 12 (SLURMWEB_REDIS_DB), so this wrapper makes db= the default of
redis.Redis before handing over to the unmodified `slurm-web` entry point. Nothing
else is changed.
"""

import os
import sys

import redis

_DB = int(os.environ.get("SLURMWEB_REDIS_DB", "0"))
_Redis = redis.Redis


class _RedisOnDb(_Redis):
    def __init__(self, *args, **kwargs):
        kwargs.setdefault("db", _DB)
        super().__init__(*args, **kwargs)


redis.Redis = _RedisOnDb


# The agent's cache keys carry no prefix and outlive the agent (jobs: 30 s; hit/miss
# counters: forever), so a previous run, perhaps on another cluster, would answer the
# first request. SLURMWEB_FRESH_CACHE=1 deletes them before starting; `cleanup` as the
# only argument deletes them and exits. Only Slurm-web's own keys (slurmweb/cache.py and
# SlurmrestdFilteredCached in slurmweb/slurmrestd/__init__.py), never the database.
def _delete_slurmweb_keys():
    from slurmweb.cache import CachingService

    conn = redis.Redis(
        host=os.environ.get("SLURMWEB_REDIS_HOST", "127.0.0.1"),
        port=int(os.environ.get("SLURMWEB_REDIS_PORT", "6379")),
    )
    conn.delete("jobs", "nodes", "partitions", "accounts", "associations", "reservations", "qos")
    for pattern in ("job-*", "node-*"):
        for key in conn.scan_iter(match=pattern, count=1000):
            conn.delete(key)
    stats = CachingService.__new__(CachingService)
    stats.connection = conn
    stats.reset()  # per-key hit/miss counters and their index sets
    conn.delete("cache-hit-total", "cache-miss-total")
    conn.close()


if sys.argv[1:] == ["cleanup"]:
    _delete_slurmweb_keys()
    sys.exit(0)
if os.environ.get("SLURMWEB_FRESH_CACHE") == "1":
    _delete_slurmweb_keys()

from slurmweb.exec.main import SlurmwebExecMain  # noqa: E402

SlurmwebExecMain.run()
