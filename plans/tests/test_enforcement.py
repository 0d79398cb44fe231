"""Slurm itself enforces the plans: jobs submitted with plain sbatch inside the cluster (as
from a login node, or from inside another job) obey the plan's GPU types, wall time and the
free plan's monthly GPU-minutes, and a plan change holds at once."""

import secrets

import pytest
from django.conf import settings
from django.core.management import call_command
from django.core.management.base import CommandError

from accounts.actions import lifecycle
from cluster.clusters.services import slurm_cli
from conftest import subscribe
from jobs.mirror.passes import mirror_jobs
from jobs.models import Job
from plans import enforcement
from plans.catalog import plan_by_code
from plans.models import Plan, PlanGpuType
from plans.slurm_limits import qos_limits

pytestmark = [pytest.mark.slurm, pytest.mark.django_db(transaction=True)]


SCRIPT = "/tmp/gpupool-plan-test.sh"  # inside the dev cluster's root


def sbatch(user: str, *options: str):
    """Plain sbatch as `user` inside the cluster's root: no portal, no REST."""
    script = settings.DEVCLUSTER_DIR / "root" / SCRIPT.lstrip("/")
    if not script.exists():
        script.write_text("#!/bin/bash\nsleep 120\n")
        script.chmod(0o755)
    output = f"--output=/tmp/plan-{secrets.token_hex(4)}.out"
    return slurm_cli().run(
        "runuser", "-u", user, "--", "sbatch", "--parsable", "--chdir=/tmp", output, "--partition=gpu",
        "--account=portal", *options, SCRIPT, check=False,
    )  # fmt: skip


def refused(result) -> bool:
    """Refused by Slurm's accounting: over a QOS or association limit, or a QOS not granted."""
    said = result.stderr + result.stdout
    return result.returncode != 0 and ("policy" in said or "Invalid qos" in said)


@pytest.fixture
def free_alice(alice, provision):
    subscribe(alice, "free")
    return provision(alice).cluster_username


def test_a_gpu_type_outside_the_plan_is_refused_by_slurm(free_alice):
    result = sbatch(free_alice, "--gres=gpu:h100:1", "--time=10")
    assert refused(result), result
    assert "QOSMaxGRESPerUser" in result.stderr or "QOS" in result.stderr
    assert not refused(sbatch(free_alice, "--gres=gpu:rtx4090:1", "--time=10"))


def test_a_job_longer_than_the_plan_allows_is_refused_by_slurm(free_alice):
    assert refused(sbatch(free_alice, "--gres=gpu:rtx4090:1", "--time=241"))
    assert not refused(sbatch(free_alice, "--gres=gpu:rtx4090:1", "--time=240"))


def test_after_a_plan_change_the_new_limits_hold(alice, free_alice, eager_tasks):
    assert refused(sbatch(free_alice, "--gres=gpu:h100:1", "--time=10"))
    lifecycle.change_plan(alice, "enterprise")
    assert not refused(sbatch(free_alice, "--qos=premium", "--gres=gpu:h100:1", "--time=10"))
    lifecycle.change_plan(alice, "free")
    assert refused(sbatch(free_alice, "--gres=gpu:h100:1", "--time=10"))
    assert refused(sbatch(free_alice, "--qos=premium", "--gres=gpu:h100:1", "--time=10"))  # not its QOS now


def test_the_free_plans_gpu_minutes_are_a_budget_slurm_keeps(alice, free_alice):
    # One GPU-hour a month for the test: a job whose time x GPUs exceeds it is refused.
    PlanGpuType.objects.filter(plan__code="free", gpu_type="rtx4090").update(included_hours=1)
    enforcement.sync()
    shown = slurm_cli().show_association_limits(free_alice)
    assert next(iter(shown.values())).gpu_minutes == 60
    assert refused(sbatch(free_alice, "--gres=gpu:rtx4090:1", "--time=90"))
    assert not refused(sbatch(free_alice, "--gres=gpu:rtx4090:1", "--time=30"))


def test_check_reports_drift_sync_fixes_it_and_noop_changes_nothing(free_alice, capsys):
    call_command("slurm_limits", "--check")
    cli = slurm_cli()
    cli.run("sacctmgr", "-i", "modify", "qos", "where", "name=free", "set", "MaxWall=999")
    with pytest.raises(CommandError, match="difference"):
        call_command("slurm_limits", "--check")
    assert "QOS free: MaxWall (min) is 999, the plan says 240" in capsys.readouterr().out
    call_command("slurm_limits", "--noop")
    assert "MaxWall=240" in capsys.readouterr().out
    assert cli.show_qos(["free"])["free"].max_wall_minutes == 999  # noop ran nothing
    call_command("slurm_limits", "--sync")
    call_command("slurm_limits", "--check")
    assert cli.show_qos(["free"])["free"].max_wall_minutes == 240


def test_jobs_from_outside_the_portal_count_toward_its_quota(alice, provision, api_client_for, slurm):
    from jobs.tests.conftest import GOOD_SPEC

    name = provision(alice).cluster_username  # pro: 2 rtx4090 at once
    for _ in range(2):
        assert not refused(sbatch(name, "--gres=gpu:rtx4090:1", "--time=10"))
    mirror_jobs(slurm)
    outside = Job.objects.filter(owner=alice, gpu_type="rtx4090")
    assert outside.count() == 2 and sum(outside.values_list("quota_gpus", flat=True)) == 2
    response = api_client_for(alice).post("/api/v1/jobs/", {**GOOD_SPEC, "gpu_type": "rtx4090"}, format="json")
    assert response.status_code == 403 and "Over quota" in response.json()["detail"]


def test_a_plan_change_while_slurm_cannot_be_reached_is_kept_and_synced_later(alice, free_alice, settings, eager_tasks):
    from accounts.models import Profile

    reachable = settings.SLURM_CLI_PREFIX
    settings.SLURM_CLI_PREFIX = ["/nonexistent/slurm-login"]
    lifecycle.change_plan(alice, "enterprise")  # the provisioning task fails inside
    profile = Profile.objects.get(user=alice)
    assert "cannot run" in profile.provisioning_error
    assert profile.user.subscriptions.get(ended_at__isnull=True).plan.code == "enterprise"  # nothing lost
    settings.SLURM_CLI_PREFIX = reachable
    with pytest.raises(CommandError, match="difference"):
        call_command("slurm_limits", "--check")  # Slurm still holds the free plan's limits
    call_command("slurm_limits", "--sync")
    assert not refused(sbatch(free_alice, "--qos=premium", "--gres=gpu:h100:1", "--time=10"))


def test_provisioning_creates_a_missing_qos_with_its_plans_limits(alice, provision):
    qos = f"zq{secrets.token_hex(3)}"
    plan = Plan.objects.create(code="trial", name="Trial", qos=qos, priority=1500, max_job_minutes=30)
    PlanGpuType.objects.create(plan=plan, gpu_type="rtx4090", max_concurrent=1)
    subscribe(alice, "trial")
    cli = slurm_cli()
    try:
        provision(alice)  # the QOS does not exist in Slurm yet
        assert cli.show_qos([qos])[qos] == qos_limits(plan_by_code("trial"))
    finally:
        cli.run("sacctmgr", "-i", "delete", "qos", qos, check=False)
