"""The dev workload on the SQLite default, one role per process (jobs/tests/test_sqlite_load.py):

    python -m testing.sqlite_load setup                 migrate, a provisioned user on Enterprise
    python -m testing.sqlite_load mirror|emulator|submit SECONDS
    python -m testing.sqlite_load cleanup               cancel the user's jobs, remove the account

Each role prints one JSON line: what it did and every database error it met. DATABASE_URL
must name a SQLite file; the processes share it as the worker, beat and web processes do.
"""

from __future__ import annotations

import json
import os
import sys
import time
from decimal import Decimal

import django

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "gpupool.settings")
django.setup()

# Imported once Django is set up (above): every role runs the portal's own code.
from django.contrib.auth import get_user_model  # noqa: E402
from django.core.management import call_command  # noqa: E402
from django.db import DatabaseError  # noqa: E402
from django.utils import timezone  # noqa: E402

from accounts import actions as account_actions  # noqa: E402
from accounts.actions.lifecycle import change_plan  # noqa: E402
from billing.actions import approve_credit_limit  # noqa: E402
from jobs import actions as job_actions  # noqa: E402
from jobs.submission.spec import SpecPolicy, parse_job_spec  # noqa: E402
from jobs.tasks import run_sync  # noqa: E402
from plans.catalog import plan_for  # noqa: E402
from telemetry.actions import storage  # noqa: E402
from telemetry.emulator import emulated_samples  # noqa: E402
from testing.slurm import remove_cluster_user, unique_cluster_name  # noqa: E402

USERNAME = "sqliteload"


def _user():
    return get_user_model().objects.get(username=USERNAME)


def setup() -> dict:

    call_command("migrate", verbosity=0)
    user = get_user_model().objects.create_user(USERNAME, f"{USERNAME}@example.org", "x-load-password-1")
    change_plan(user, "enterprise")
    approve_credit_limit(user, Decimal("100000"), actor=None, reason="load test account")
    profile = account_actions.provision(user.profile.pk, preferred_name=unique_cluster_name("ptq"))
    return {"cluster_user": profile.cluster_username}


def mirror(seconds: float) -> dict:

    passes, errors = 0, []
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        outcome = run_sync()
        passes += 1
        if "jobs_error" in outcome:
            errors.append(outcome["jobs_error"])
    return {"passes": passes, "errors": errors}


def emulator(seconds: float) -> dict:

    writes, errors = 0, []
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            storage.store_samples(emulated_samples(timezone.now()), source="emulator")
            writes += 1
        except DatabaseError as exc:
            errors.append(f"{type(exc).__name__}: {exc}")
        time.sleep(0.05)
    return {"writes": writes, "errors": errors}


def submit(seconds: float) -> dict:

    user = _user()
    policy = SpecPolicy.from_settings()
    data = {
        "name": "sqlite-load",
        "image": "nvcr.io/nvidia/pytorch:24.01-py3",
        "gpu_type": "rtx4090",
        "gpu_count": 1,
        "command": "sleep 2",
        "time_limit_minutes": 5,
    }
    accepted, refused, errors = 0, 0, []
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            job_actions.submit(user, parse_job_spec(data, plan=plan_for(user), policy=policy))
            accepted += 1
        except DatabaseError as exc:
            errors.append(f"{type(exc).__name__}: {exc}")
        except Exception as exc:  # the plan's quota: refused, not a database failure
            refused += 1
            last_refusal = str(exc)
            time.sleep(0.2)
    result = {"accepted": accepted, "refused": refused, "errors": errors}
    if refused:
        result["last_refusal"] = last_refusal
    return result


def cleanup() -> dict:

    name = _user().profile.cluster_username
    remove_cluster_user(name)
    return {"removed": name}


if __name__ == "__main__":
    role = sys.argv[1]
    if role in {"mirror", "emulator", "submit"}:
        outcome = globals()[role](float(sys.argv[2]))
    else:
        outcome = {"setup": setup, "cleanup": cleanup}[role]()
    print(json.dumps({"role": role, **outcome}))
