"""The console's maintenance page and what the portal says of a window without asking Slurm: the running
jobs that would cross a window, Slurm's pending reason in words; the page is the admins' alone, and bad
input changes nothing. (Planning one on the real cluster, and the job form's hint of when a job would
wait for it: test_maintenance.py and test_browser_maintenance.py.)"""

from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from cluster.models import Node
from console.actions.maintenance import crossing_jobs
from console.models import MaintenanceWindow
from jobs.diagnosis.reasons import MAINTENANCE, explain_reason
from jobs.models import Job

pytestmark = pytest.mark.django_db


def _nodes():
    Node.objects.create(name="gpu-a100-01", state="MIXED", gpus=[{"type": "a100", "count": 4, "used_indexes": [0]}])
    Node.objects.create(name="gpu-a100-02", state="IDLE", gpus=[{"type": "a100", "count": 4, "used_indexes": []}])
    Node.objects.create(name="gpu-h100-01", state="IDLE", gpus=[{"type": "h100", "count": 2, "used_indexes": []}])


def _window(hours_ahead=2, nodes=()):
    start = timezone.now() + timedelta(hours=hours_ahead)
    return MaintenanceWindow.objects.create(
        start=start,
        end=start + timedelta(hours=1),
        nodes=list(nodes),
        reason="Slurm upgrade",
        slurm_name="gpupool-maint-1",
    )


def _running(owner, nodes: str, ends_in_hours: float, pk_hint: int):
    now = timezone.now()
    return Job.objects.create(
        owner=owner, slurm_job_id=8800 + pk_hint, state="RUNNING", nodes=nodes, name=f"run{pk_hint}",
        start_time=now - timedelta(minutes=5), end_time=now + timedelta(hours=ends_in_hours),
    )  # fmt: skip


def test_the_running_jobs_that_would_cross_a_window_are_listed(alice):
    _nodes()
    crossing = _running(alice, "gpu-a100-01", 3, 1)
    _running(alice, "gpu-a100-02", 1, 2)  # ends before the window starts
    elsewhere = _running(alice, "gpu-h100-01", 3, 3)
    everywhere = _window()
    assert {job.pk for job in crossing_jobs(everywhere)} == {crossing.pk, elsewhere.pk}
    some = _window(nodes=["gpu-a100-01", "gpu-a100-02"])
    assert [job.pk for job in crossing_jobs(some)] == [crossing.pk]


def test_slurms_maintenance_reason_reads_in_words():
    # Slurm's own text, as squeue gives it (slurmrestd says "ReqNodeNotAvail" alone), in words.
    assert explain_reason("ReqNodeNotAvail, Reserved for maintenance") == MAINTENANCE
    assert explain_reason("ReqNodeNotAvail,_Reserved_for_maintenance") == MAINTENANCE


def test_the_page_is_the_admins_and_shows_the_crossing_jobs(alice, bob, admin_user, marketer):
    _nodes()
    _running(bob, "gpu-a100-01", 3, 1)
    window = _window()
    for who in (alice, marketer):
        browser = Client()
        browser.force_login(who)
        assert browser.get("/console/maintenance/").status_code == 403
        assert browser.post(f"/console/maintenance/{window.pk}/cancel").status_code == 403
    browser = Client()
    browser.force_login(admin_user)
    page = browser.get("/console/maintenance/").content.decode()
    assert f'data-window="{window.pk}"' in page and "Slurm upgrade" in page
    assert "1 running job would still run when it starts" in page and "bob" in page
    assert "data-confirm=" in page  # cancelling asks first


def _local(hours: float) -> str:
    return timezone.localtime(timezone.now() + timedelta(hours=hours)).strftime("%Y-%m-%dT%H:%M")


@pytest.mark.parametrize(
    ("form", "message"),
    [
        ({"start": "", "end": 3, "reason": "x"}, "Give the start as a date and time."),
        ({"start": -3, "end": -2, "reason": "x"}, "A window starts in the future."),
        ({"start": 2, "end": 3, "reason": " "}, "Say why"),
        ({"start": 3, "end": 2, "reason": "x"}, "A window ends after it starts."),
    ],
)
def test_bad_input_is_said_and_changes_nothing(admin_user, form, message):
    _nodes()
    browser = Client()
    browser.force_login(admin_user)
    posted = {key: _local(value) if isinstance(value, int) else value for key, value in form.items()}
    answer = browser.post("/console/maintenance/", posted)
    assert answer.status_code == 400 and message in answer.content.decode()
    assert not MaintenanceWindow.objects.exists()
