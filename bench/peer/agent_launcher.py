"""Start the stock `slurm-web` command, run by /work/peer/venv's python, on a chosen Redis database.

    /work/peer/venv/bin/python bench/peer/agent_launcher.py agent --conf-defs ... --conf ...

Slurm-web 6.0's cache (slurmweb/cache.py) calls redis.Redis(host, port, password): its
settings have no database number, so it always uses database 0. The benchmark's rule
is database 12 (SLURMWEB_REDIS_DB), so this wrapper makes db= the default of
redis.Redis before handing over to the unmodified `slurm-web` entry point. Nothing
else is changed.
"""

import os

import redis

_DB = int(os.environ.get("SLURMWEB_REDIS_DB", "0"))
_Redis = redis.Redis


class _RedisOnDb(_Redis):
    def __init__(self, *args, **kwargs):
        kwargs.setdefault("db", _DB)
        super().__init__(*args, **kwargs)


redis.Redis = _RedisOnDb

from slurmweb.exec.main import SlurmwebExecMain  # noqa: E402

SlurmwebExecMain.run()
