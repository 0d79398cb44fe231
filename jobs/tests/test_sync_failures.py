"""Every failure of a mirror pass reaches SyncRun (and so the console), not only Slurm's."""

import pytest
from django.db import OperationalError
from django.test import Client

from cluster.models import SyncRun
from jobs import tasks

pytestmark = pytest.mark.django_db


def test_a_database_failure_in_the_job_mirror_is_recorded_and_shown(monkeypatch, admin_user):
    def locked(_client, queue=None, memo=None):
        raise OperationalError("database is locked")

    monkeypatch.setattr(tasks, "mirror_jobs", locked)
    monkeypatch.setattr(tasks, "sync_nodes_if_due", lambda client, started: {})
    outcome = tasks.run_sync()

    assert outcome["jobs_error"] == "OperationalError: database is locked"
    run = SyncRun.objects.get(name="jobs")
    assert run.last_error == "OperationalError: database is locked" and run.last_error_at is not None
    browser = Client()
    browser.force_login(admin_user)
    page = browser.get("/").content.decode()
    assert "Cluster jobs mirror failing" in page and "database is locked" in page


def test_a_failing_node_pass_is_recorded_and_the_job_pass_still_counts(monkeypatch):
    class Result:
        seen, changed = 3, 1

    def broken(client, started):
        raise KeyError("gres")

    monkeypatch.setattr(tasks, "mirror_jobs", lambda client, queue=None, memo=None: Result())
    monkeypatch.setattr(tasks, "sync_nodes_if_due", broken)
    outcome = tasks.run_sync()

    assert "nodes_error" in outcome and "jobs_error" not in outcome
    assert SyncRun.objects.get(name="nodes").last_error == "KeyError: 'gres'"
    assert SyncRun.objects.get(name="jobs").last_error == ""


def test_a_failing_accounting_pass_is_recorded(monkeypatch):
    def broken(client):
        raise ValueError("slurmdbd said nonsense")

    monkeypatch.setattr(tasks, "record_missing_accounting", broken)
    assert tasks.sync_accounting.apply().get() is None
    assert SyncRun.objects.get(name="accounting").last_error == "ValueError: slurmdbd said nonsense"
