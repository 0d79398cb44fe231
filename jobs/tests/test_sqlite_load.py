"""The SQLite default holds the dev workload: the mirror, the telemetry emulator and
submissions in three processes on one file, with no "database is locked" (two mirror
passes died of it before WAL, the busy timeout and IMMEDIATE transactions)."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SECONDS = 20


def _role(environment, *args, timeout=120) -> dict:
    done = subprocess.run(
        [sys.executable, "-m", "testing.sqlite_load", *args],
        cwd=REPO,
        env=environment,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


# SQLite's locking is the subject, not Slurm's answers: the first release alone (the mirror's
# reading of both releases is checked on each by its own tests).
@pytest.mark.slurm
@pytest.mark.first_release
def test_mirror_emulator_and_submissions_share_the_sqlite_file(tmp_path, slurm):
    environment = {
        **os.environ,
        "DATABASE_URL": f"sqlite:///{tmp_path / 'load.sqlite3'}",
        "CELERY_TASK_ALWAYS_EAGER": "1",
        "TELEMETRY_EMULATOR": "1",
        "SUBMIT_RATE_LIMIT_PER_MINUTE": "100000",
        "SUBMIT_RATE_LIMIT_PER_IP_PER_MINUTE": "100000",
    }
    _role(environment, "setup")
    try:
        roles = [
            subprocess.Popen(
                [sys.executable, "-m", "testing.sqlite_load", role, str(SECONDS)],
                cwd=REPO,
                env=environment,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            for role in ("mirror", "emulator", "submit")
        ]
        outcomes = {}
        for process in roles:
            out, err = process.communicate(timeout=SECONDS + 120)
            assert process.returncode == 0, err[-3000:]
            outcome = json.loads(out.strip().splitlines()[-1])
            outcomes[outcome["role"]] = outcome
    finally:
        _role(environment, "cleanup")

    for outcome in outcomes.values():
        assert outcome["errors"] == [], outcome
    # Each did real work against the same file at the same time.
    assert outcomes["mirror"]["passes"] >= 5
    assert outcomes["emulator"]["writes"] >= 20
    assert outcomes["submit"]["accepted"] >= 5, outcomes["submit"]
