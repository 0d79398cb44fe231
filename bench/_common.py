"""Shared set-up for the benchmarks: Django on a throwaway database, real services."""

from __future__ import annotations

import os
import statistics
import sys
import time
from contextlib import contextmanager
from pathlib import Path

BASE_DIR = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(BASE_DIR))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "gpupool.settings")
os.environ.setdefault("DEBUG", "1")
os.environ.setdefault("DATABASE_URL", "postgres://gpupool:gpupool@127.0.0.1:5432/gpupool")
os.environ.setdefault("REDIS_URL", "redis://127.0.0.1:6379/12")
os.environ.setdefault("SUBMIT_RATE_LIMIT_PER_MINUTE", "100000")
os.environ.setdefault("SUBMIT_RATE_LIMIT_PER_IP_PER_MINUTE", "100000")
os.environ.setdefault("CLUSTER_SYNC_INTERVAL_SECONDS", "1")
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
os.environ.setdefault("ALLOWED_HOSTS", "127.0.0.1,localhost,testserver")
# Static files straight from static/, as the tests read them (no collectstatic needed).
os.environ.setdefault("STATIC_HASHED", "0")
os.environ.setdefault("WHITENOISE_USE_FINDERS", "1")

import django  # noqa: E402

django.setup()


@contextmanager
def bench_database():
    """A fresh database (test_<name>), migrated, dropped afterwards."""
    from django.db import connection

    name = connection.creation.create_test_db(verbosity=0, autoclobber=True, keepdb=False)
    try:
        yield name
    finally:
        from django.db import connections
        from django.db.utils import OperationalError

        for alias in connections:
            connections[alias].close()
        # A server's process may still be closing its connection (a Celery pool's child): wait.
        for attempt in range(10):
            try:
                connection.creation.destroy_test_db(name, verbosity=0)
                break
            except OperationalError:
                if attempt == 9:
                    with connection._nodb_cursor() as cursor:
                        cursor.execute(
                            "SELECT pid, application_name, client_addr, backend_start, left(query, 120) "
                            "FROM pg_stat_activity WHERE datname = %s",
                            [name],
                        )
                        print(f"still using {name}: {cursor.fetchall()}", file=sys.stderr)
                    raise
                time.sleep(1)


def make_user(username: str, plan: str = "enterprise", provision: bool = True, role: str = ""):
    """A user on `plan`, with a cluster account unless `provision` is False, in `role` if given."""
    from django.contrib.auth import get_user_model

    from accounts import actions
    from plans.actions import subscriptions
    from plans.models import Plan

    user = get_user_model().objects.create_user(username=username, password="bench-" + username)
    if role:
        user.profile.role = role
        user.profile.save(update_fields=["role"])
    subscriptions.change(user, Plan.objects.get(code=plan))
    from django.conf import settings

    if plan in settings.PAY_AFTERWARDS_PLANS:
        from decimal import Decimal

        from billing.actions import approve_credit_limit

        approve_credit_limit(user, Decimal("1000000"), actor=None, reason="benchmark account")
    if provision:
        actions.provision(user.profile.pk, preferred_name=f"bench{os.getpid() % 10000}{username}"[:30])
        user.profile.refresh_from_db()
    return user


def signed_in_session(user) -> str:
    """A session key of `user` signed in, as a browser's sessionid cookie carries it."""
    from django.contrib.auth import BACKEND_SESSION_KEY, HASH_SESSION_KEY, SESSION_KEY
    from django.contrib.sessions.backends.db import SessionStore

    session = SessionStore()
    session.update(
        {
            SESSION_KEY: str(user.pk),
            BACKEND_SESSION_KEY: "django.contrib.auth.backends.ModelBackend",
            HASH_SESSION_KEY: user.get_session_auth_hash(),
        }
    )
    session.create()
    return session.session_key


def retire_user(user) -> None:
    from testing.slurm import remove_cluster_user

    if user.profile.cluster_username:
        remove_cluster_user(user.profile.cluster_username)


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(fraction * (len(ordered) - 1))))
    return ordered[index]


def describe(label: str, seconds: list[float]) -> str:
    ms = [value * 1000 for value in seconds]
    return (
        f"{label}: n={len(ms)} p50={statistics.median(ms):.1f} ms p95={percentile(ms, 0.95):.1f} ms "
        f"min={min(ms):.1f} ms max={max(ms):.1f} ms"
    )


@contextmanager
def count_queries():
    """Counts SQL statements run on the default connection (works with persistent
    connections, unlike CaptureQueriesContext, which loses them on a reconnect)."""
    from django.db import connection

    counter = {"queries": 0}

    def wrapper(execute, sql, params, many, context):
        counter["queries"] += 1
        return execute(sql, params, many, context)

    with connection.execute_wrapper(wrapper):
        yield counter


def wait_for_slurm_room(count: int, timeout: float = 900) -> None:
    """Until slurmctld can take `count` more jobs or tasks: an earlier run's records count toward
    MaxJobCount (every array task one) until MinJobAge after they ended, and a submission past it
    is refused (Slurm error 2007)."""
    from cluster.clusters.services import slurm_cli

    config = slurm_cli().run("scontrol", "show", "config").stdout
    max_jobs = int(next(line.split("=")[1] for line in config.splitlines() if line.startswith("MaxJobCount")))
    deadline = time.monotonic() + timeout
    while True:
        listed = slurm_cli().run("squeue", "--noheader", "--array", "--states=all", "--format=%i").stdout
        held = len(listed.split())
        if held + count <= max_jobs:
            return
        if time.monotonic() > deadline:
            raise SystemExit(f"slurmctld still holds {held} records (MaxJobCount {max_jobs}) after {timeout:.0f} s")
        print(f"waiting: slurmctld holds {held} records, {count} more would pass MaxJobCount {max_jobs}", flush=True)
        time.sleep(30)


def options(**defaults):
    """The command line's options, each named by a keyword (`page_size` is `--page-size`) and
    typed by its default: `options(jobs=10_000, repeat=5)`. A default of False makes a flag; a
    (default, help) pair says what the option is for."""
    import argparse

    parser = argparse.ArgumentParser()
    for name, default in defaults.items():
        default, help_text = default if isinstance(default, tuple) else (default, None)
        flag = "--" + name.replace("_", "-")
        if default is False:
            parser.add_argument(flag, action="store_true", help=help_text)
        else:
            parser.add_argument(flag, type=type(default), default=default, help=help_text)
    return parser.parse_args()
