"""The console against the real dev cluster: heatmap data, node actions, diagnostics."""

import pytest
from django.conf import settings
from django.test import Client
from django.utils import timezone

from audit.models import AuditLog
from cluster.actions.mirror import mirror_nodes
from cluster.clusters.services import rest_client, slurm_cli
from cluster.errors import words_for_slurm_output
from conftest import subscribe
from console.actions.diagnostics import parse_nvidia_smi_query
from console.heatmap import HIDDEN, heatmap_payload
from jobs.models import Job
from jobs.tasks import run_sync
from telemetry.actions.storage import store_samples
from telemetry.emulator import emulated_samples
from testing.slurm import submission, wait_for, wait_for_state

pytestmark = pytest.mark.django_db(transaction=True)
# Each test that needs the dev cluster says so (`slurm`); the others run without it.


def _gpu_cells(payload, node_name):
    return next(node for node in payload["nodes"] if node["n"] == node_name)["g"]


@pytest.mark.slurm
def test_the_heatmap_shows_a_jobs_gpus_to_its_owner_and_only_in_use_to_others(alice, bob, admin_user, provision):
    subscribe(alice, "enterprise")  # Slurm itself refuses h100 jobs of the pro plan
    profile = provision(alice)
    client = rest_client(profile.cluster_username)
    job_id = client.submit_job(submission("sleep 60", tres_per_node="gres/gpu:h100:2", name="hm-job"))
    wait_for_state(client, job_id, {"RUNNING"})
    wait_for(lambda: run_sync() and Job.objects.filter(slurm_job_id=job_id, state="RUNNING").exists(), what="mirror")
    job = Job.objects.get(slurm_job_id=job_id)
    assert job.gpu_allocation == {"gpu-h100-01": [0, 1]}
    store_samples(emulated_samples(timezone.now()), source="emulator")

    mine = _gpu_cells(heatmap_payload(alice, is_admin=False), "gpu-h100-01")
    payload = heatmap_payload(alice, is_admin=False)
    assert [payload["jobs"][cell[3]]["name"] for cell in mine] == ["hm-job", "hm-job"]
    assert all(cell[0] > 30 for cell in mine)  # held GPUs are busy in the emulator
    theirs = _gpu_cells(heatmap_payload(bob, is_admin=False), "gpu-h100-01")
    assert [cell[3] for cell in theirs] == [HIDDEN, HIDDEN]
    assert "hm-job" not in str(heatmap_payload(bob, is_admin=False))
    admin_view = heatmap_payload(admin_user, is_admin=True)
    assert admin_view["jobs"][_gpu_cells(admin_view, "gpu-h100-01")[0][3]]["user"] == "alice"
    idle = _gpu_cells(payload, "gpu-4090-02")
    assert all(cell[3] == -1 for cell in idle)
    client.cancel_job(job_id)


@pytest.mark.slurm
def test_drain_and_resume_show_up_in_slurm(admin_user):
    run_sync()
    browser = Client()
    browser.force_login(admin_user)
    node = "gpu-4090-02"
    try:
        response = browser.post(f"/console/nodes/{node}/drain", {"reason": "fan noise, check bearings"})
        assert response.status_code == 302
        shown = slurm_cli().run("scontrol", "show", "node", node).stdout
        assert "DRAIN" in shown and "Reason=fan noise, check bearings" in shown
        entry = AuditLog.objects.get(action="drain")
        assert entry.succeeded and entry.actor == admin_user and entry.actor_name == admin_user.username
        assert entry.target == node and entry.reason == "fan noise, check bearings"
        # The node as Slurm had it either side of the drain (read back through the mirror).
        assert "DRAIN" not in entry.before["flags"] and entry.before["reason"] == ""
        assert "DRAIN" in entry.after["flags"] and entry.after["reason"] == "fan noise, check bearings"
        assert "DRAIN" in browser.get(f"/console/nodes/{node}/").content.decode()
    finally:
        browser.post(f"/console/nodes/{node}/resume")
    shown = slurm_cli().run("scontrol", "show", "node", node).stdout
    assert "DRAIN" not in shown.split("State=")[1].split()[0]
    resumed = AuditLog.objects.get(action="resume", succeeded=True)
    assert "DRAIN" in resumed.before["flags"] and "DRAIN" not in resumed.after["flags"]


@pytest.mark.slurm
def test_a_failed_action_is_audited_with_its_error(admin_user):
    run_sync()
    browser = Client()
    browser.force_login(admin_user)
    browser.post("/console/nodes/gpu-4090-02/drain", {"reason": "bad; reason"})
    entry = AuditLog.objects.get(action="drain")
    assert not entry.succeeded and "reason" in entry.result


@pytest.mark.slurm
def test_diagnose_runs_a_job_on_that_node_and_says_plainly_that_nvidia_smi_is_missing(alice, provision):
    provision(alice)
    mirror_nodes(rest_client())
    browser = Client()
    browser.force_login(alice)
    response = browser.post("/console/nodes/gpu-a100-02/gpus/1/diagnose")
    assert response.status_code == 302
    job = Job.objects.get(owner=alice, name="diagnose-gpu-a100-02-gpu1")
    # Until the mirror reads its end, the result's part re-reads itself and says so in words.
    waiting = browser.get("/console/nodes/gpu-a100-02/gpus/1/").content.decode()
    assert 'data-live-part="diagnostic" data-live-active' in waiting
    assert "the result shows here when it ends" in waiting and ">refresh<" not in waiting
    done = wait_for_state(rest_client(), job.slurm_job_id, {"COMPLETED", "FAILED"})
    assert done.nodes == "gpu-a100-02"
    run_sync()
    page = browser.get("/console/nodes/gpu-a100-02/gpus/1/").content.decode()
    assert "data-diagnostic-unavailable" in page
    assert "nvidia-smi is not available on gpu-a100-02" in page
    assert 'data-live-part="diagnostic">' in page  # ended: nothing more to re-read


NVIDIA_SMI_SAMPLE = """
==============NVSMI LOG==============

Timestamp                                 : Sun Nov 29 21:30:01 2026
Driver Version                            : 550.54.15
CUDA Version                              : 12.4

Attached GPUs                             : 1
GPU 00000000:3B:00.0
    FB Memory Usage
        Total                             : 40960 MiB
        Reserved                          : 635 MiB
        Used                              : 30512 MiB
        Free                              : 9813 MiB
    Utilization
        Gpu                               : 87 %
        Memory                            : 41 %
    Temperature
        GPU Current Temp                  : 64 C
        GPU Shutdown Temp                 : 92 C
    GPU Power Readings
        Power Draw                        : 251.30 W
        Current Power Limit               : 400.00 W
"""


def test_nvidia_smi_query_output_is_parsed_by_section():
    parsed = parse_nvidia_smi_query(NVIDIA_SMI_SAMPLE)
    gpu = parsed["GPU 00000000:3B:00.0"]
    assert parsed["Driver Version"] == "550.54.15"
    assert gpu["FB Memory Usage"]["Used"] == "30512 MiB"
    assert gpu["Utilization"]["Gpu"] == "87 %"
    assert gpu["Temperature"]["GPU Current Temp"] == "64 C"
    assert gpu["GPU Power Readings"]["Power Draw"] == "251.30 W"


@pytest.mark.parametrize(
    "method, path",
    [
        ("get", "/console/nodes/"),
        ("get", "/console/jobs/"),
        ("get", "/console/alerts/"),
        ("get", "/console/audit/"),
        ("get", "/console/telemetry/"),
        ("get", "/console/operations/"),
        ("post", "/console/nodes/gpu-4090-01/drain"),
        ("post", "/console/nodes/gpu-4090-01/resume"),
    ],
)
@pytest.mark.slurm
def test_a_non_admin_gets_403_on_every_admin_page_and_action(alice, marketer, method, path):
    run_sync()
    for person in (alice, marketer):
        browser = Client()
        browser.force_login(person)
        assert getattr(browser, method)(path, {"reason": "x"}).status_code == 403
    # (The people fixtures write account entries of their own.)
    assert not AuditLog.objects.exclude(action__startswith="account.").exists()
    assert (
        "DRAIN" not in slurm_cli().run("scontrol", "show", "node", "gpu-4090-01").stdout.split("State=")[1].split()[0]
    )


def test_settings_point_the_emulator_at_the_dev_cluster_only():
    assert settings.TELEMETRY_EMULATOR is False  # production default: off


@pytest.mark.slurm
def test_gpu_reset_holds_the_node_runs_the_reset_job_in_it_and_releases_it(admin_user, provision, slurm):
    from console.actions import gpu_reset
    from console.models import GpuReset

    provision(admin_user)
    mirror_nodes(rest_client())
    reset = GpuReset.objects.create(requested_by=admin_user, node="gpu-h100-01", index=1)
    reset = GpuReset.objects.select_related("requested_by__profile").get(pk=reset.pk)
    try:
        _reset_flow(reset, gpu_reset, slurm)
    finally:
        # A failed run must not leave the node held for the next test run.
        slurm_cli().run("scontrol", "delete", f"ReservationName=gpureset_{reset.pk}", check=False)


def _reset_flow(reset, gpu_reset, slurm):
    from console.models import GpuReset

    gpu_reset.reserve_and_submit(reset)
    reset.refresh_from_db()
    assert reset.step == "resetting", reset.result
    held = [r for r in slurm.list_reservations() if r.name == reset.reservation]
    assert held and held[0].nodes == "gpu-h100-01" and "MAINT" in held[0].flags

    wait_for(
        lambda: gpu_reset.check_job(GpuReset.objects.select_related("job").get(pk=reset.pk)),
        timeout=90,
        what="the reset job to end",
    )
    reset.refresh_from_db()
    assert reset.step == "done"
    assert "nvidia-smi is not available on gpu-h100-01" in reset.result
    assert slurm.ended_job_nodes(slurm.get_job(reset.job.slurm_job_id)) == "gpu-h100-01"
    assert not [r for r in slurm.list_reservations() if r.name == reset.reservation]
    entries = AuditLog.objects.filter(action__startswith="gpu_reset").order_by("created_at", "id")
    actions = list(entries.values_list("action", flat=True))
    assert actions == ["gpu_reset.hold", "gpu_reset.job", "gpu_reset.release", "gpu_reset"]
    assert AuditLog.objects.get(action="gpu_reset").succeeded is False  # nothing was reset on emulated GPUs
    hold = AuditLog.objects.get(action="gpu_reset.hold")
    assert hold.target == "gpu-h100-01/gpu1" and hold.after == {"reservation": reset.reservation}
    assert AuditLog.objects.get(action="gpu_reset").after == {"step": "done"}


def test_gpu_reset_is_admin_only(alice):
    run_sync()
    browser = Client()
    browser.force_login(alice)
    assert browser.post("/console/nodes/gpu-h100-01/gpus/0/reset").status_code == 403
    from console.models import GpuReset

    assert GpuReset.objects.count() == 0


@pytest.mark.slurm
def test_diagnostics_respect_the_plan_and_one_at_a_time(alice, provision):
    from console.models import DiagnosticRun

    provision(alice)  # pro: rtx4090 and a100, no h100
    mirror_nodes(rest_client())
    browser = Client()
    browser.force_login(alice)
    browser.post("/console/nodes/gpu-h100-01/gpus/0/diagnose")
    assert not DiagnosticRun.objects.exists()
    browser.post("/console/nodes/gpu-a100-01/gpus/0/diagnose")
    browser.post("/console/nodes/gpu-a100-01/gpus/1/diagnose")
    assert DiagnosticRun.objects.filter(job__isnull=False).count() == 1
    page = browser.get("/console/nodes/gpu-a100-01/gpus/1/", follow=True)
    assert page.status_code == 200


@pytest.mark.slurm
def test_resuming_an_idle_node_is_refused_in_words_and_slurms_text_is_kept_for_the_audit(admin_user):
    run_sync()
    browser = Client()
    browser.force_login(admin_user)
    browser.post("/console/nodes/gpu-4090-02/resume")
    entry = AuditLog.objects.get(action="resume")
    assert not entry.succeeded
    assert entry.result == words_for_slurm_output("Invalid node state transition")  # Slurm 24.11 and 26.05 alike
    assert "only a drained, down or failed node can be resumed" in entry.result
    assert "scontrol update NodeName=gpu-4090-02 State=RESUME" in entry.parameters["slurm"]
    page = browser.get("/console/nodes/gpu-4090-02/").content.decode()
    assert "only a drained, down or failed node can be resumed" in page and "scontrol update" not in page
