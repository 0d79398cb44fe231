"""Spot jobs: their own QOS, preempted by every plan's (plans/slurm_limits.py); the notice (SIGTERM
and the grace time), the requeue, and the preempted runs on the job's cost detail.

The slurm test runs on the dev cluster (PreemptType=preempt/qos in its slurm.conf): a spot job
fills the one H100 node, a plan's job needs one of its GPUs, the spot job's command hears
SIGTERM inside its container, is requeued, and slurmdbd's PREEMPTED run reaches the job page."""

import pytest
from django.conf import settings

from conftest import subscribe
from jobs import actions
from jobs.models import Job
from jobs.submission.spec import SpecError, SpecPolicy, parse_job_spec
from jobs.tests.conftest import GOOD_SPEC
from plans.catalog import plan_for
from plans.product_plans import product_plan
from plans.slurm_limits import association_terms, spot_qos_limits


def _spec(user, **changes):
    return parse_job_spec({**GOOD_SPEC, **changes}, plan=plan_for(user), policy=SpecPolicy.from_settings())


@pytest.mark.django_db
def test_paid_plans_may_run_spot_and_the_free_plan_may_not(alice):
    assert _spec(alice, spot=True).spot and _spec(alice, spot="on").spot and not _spec(alice).spot
    assert _spec(alice, spot=True).to_dict()["spot"] is True and "spot" not in _spec(alice).to_dict()
    with pytest.raises(SpecError) as refused:
        _spec(alice, spot="yes please")
    assert refused.value.errors == {"spot": ["must be true or false"]}
    subscribe(alice, "free")
    with pytest.raises(SpecError) as refused:
        _spec(alice, spot=True, gpu_type="rtx4090")
    assert "does not include spot jobs" in refused.value.errors["spot"][0]
    # The association follows: the spot QOS for a paid plan, not for the free one.
    assert settings.SPOT_QOS in association_terms(product_plan("pro"), is_admin=False).qos
    assert settings.SPOT_QOS not in association_terms(product_plan("free"), is_admin=False).qos


@pytest.mark.django_db
def test_a_spot_job_runs_in_the_spot_qos_outside_the_plans_quota(alice, settings):
    settings.SUBMIT_INLINE = False
    alice.profile.cluster_username, alice.profile.provisioned_at = "alice", alice.date_joined
    alice.profile.save()
    quota = plan_for(alice).gpu_quota["a100"]
    paid = [actions.submit(alice, _spec(alice, gpu_count=1)) for _ in range(quota)]
    spot = actions.submit(alice, _spec(alice, gpu_count=1, spot=True))
    assert {job.qos for job in paid} == {"pro"} and spot.qos == settings.SPOT_QOS
    assert (spot.quota_gpus, spot.quota_shards) == (0, 0)  # the plan's GPUs stay free for plan jobs
    with pytest.raises(SpecError, match="reservation"):
        actions.submit(alice, _spec(alice, spot=True), reservation_id=1)
    assert Job.objects.filter(owner=alice).count() == quota + 1


@pytest.mark.django_db
def test_the_spot_qos_is_preempted_by_every_plans_qos_with_notice():
    from plans.models import Plan
    from plans.slurm_limits import all_qos_limits

    limits = all_qos_limits()
    spot = limits[0]  # first: the plans' Preempt lists name it
    assert spot.name == settings.SPOT_QOS and spot.priority == 0 and spot.preempt_mode == "requeue"
    assert spot.grace_seconds == settings.SPOT_GRACE_SECONDS and spot.max_tres_per_user == {}
    plan_qos = {plan.qos for plan in Plan.objects.all()}
    assert {limit.name for limit in limits[1:]} == plan_qos
    assert all(limit.preempt == (settings.SPOT_QOS,) for limit in limits[1:])
    assert spot_qos_limits([product_plan("free")]).max_wall_minutes == 60  # no plan may: a bound all the same


# --- on the dev cluster ------------------------------------------------------------------------


@pytest.mark.slurm
@pytest.mark.django_db(transaction=True)
def test_a_spot_job_hears_sigterm_is_requeued_and_shows_its_preempted_run(alice, bob, provision, slurm, settings):
    from billing.usage.metering import run_metering
    from cluster.clusters.services import job_paths, slurm_cli
    from jobs import protocol
    from jobs.costs import cost_for
    from jobs.tasks import run_sync
    from plans.slurm_limits import qos_limits
    from testing.slurm import wait_for, wait_for_state

    if settings.JOB_RUNTIME != "pyxis":
        pytest.fail("the notice reaches job steps: the dev cluster must run containers (cluster.sh up)")
    settings.SUBMIT_INLINE = True
    settings.SPOT_GRACE_SECONDS = 15
    settings.SPOT_PREEMPT_EXEMPT_SECONDS = 0
    cli = slurm_cli()
    cli.ensure_qos(spot_qos_limits([product_plan("enterprise")]))
    subscribe(alice, "enterprise")
    subscribe(bob, "enterprise")
    cli.ensure_qos(qos_limits(product_plan("enterprise")))
    provision(alice)
    provision(bob)
    try:
        command = (
            'echo "run ${SLURM_RESTART_COUNT:-0} started"; '
            "trap 'echo \"SIGTERM: checkpointing\"; sleep 30' TERM; sleep 600 & wait; echo after-wait"
        )
        spot = actions.submit(
            alice, _spec(alice, gpu_type="h100", gpu_count=2, command=command, time_limit_minutes=10, spot=True)
        )
        spot.refresh_from_db()
        assert spot.slurm_job_id, spot.error
        wait_for_state(slurm, spot.slurm_job_id, {"RUNNING"}, timeout=90)
        output = job_paths().to_local(protocol.job_directory(spot)) / "stdout.log"
        wait_for(lambda: output.exists() and "run 0 started" in output.read_text(), timeout=60, what="the spot job")

        paid = actions.submit(bob, _spec(bob, gpu_type="h100", gpu_count=1, command="echo paid", time_limit_minutes=5))
        paid.refresh_from_db()
        assert paid.slurm_job_id, paid.error
        # The notice: SIGTERM inside the container as soon as slurmctld preempts, long before the
        # grace time ends. slurmctld preempts when it schedules bob's job: at once when quiet, at
        # its next backfill pass (every 30 s) on a busy machine, hence the wait.
        try:
            wait_for(lambda: "SIGTERM: checkpointing" in output.read_text(), timeout=120, what="the spot job's SIGTERM")
        except AssertionError as exc:
            shown = [
                cli.run("scontrol", "show", "job", str(job.slurm_job_id), check=False).stdout for job in (spot, paid)
            ]
            raise AssertionError(f"{exc}; slurmctld shows: {shown}") from None
        wait_for_state(slurm, paid.slurm_job_id, {"COMPLETED"}, timeout=120)
        shown = cli.run("scontrol", "show", "job", str(spot.slurm_job_id)).stdout
        assert "Restarts=1" in shown, shown
        accounted = cli.run(
            "sacct", "-j", str(spot.slurm_job_id), "--duplicates", "-X", "-n", "-P", "-o", "State"
        ).stdout
        assert "PREEMPTED" in accounted.split(), accounted

        def preempted_run_on_the_page():
            run_sync()
            run_metering()
            cost = cost_for(Job.objects.get(pk=spot.pk))
            return cost and cost.detail and cost.detail.preempted_runs == 1 and cost.detail

        detail = wait_for(preempted_run_on_the_page, timeout=120, interval=2, what="the preempted run, metered")
        from billing.models import UsageRecord

        # Two H100s for at least a second (the message: every run metered, for a failure's reader).
        metered = list(
            UsageRecord.objects.filter(job_id=spot.pk).values(
                "state", "gpu_type", "gpu_count", "seconds", "run_start", "run_end"
            )
        )
        assert detail.preempted_gpu_seconds >= 2, metered
        # Charged as spot (the QOS slurmdbd recorded), its notice billed: a job (bob's) took its
        # GPUs, and the portal cannot tell a second account of alice's from bob (billing/spot.py).
        run = UsageRecord.objects.get(job_id=spot.pk, state="PREEMPTED")
        assert run.qos == settings.SPOT_QOS and run.note.startswith("spot:")
        assert run.unbilled_grace_gpu_seconds == 0 and "not billed" not in run.note
        assert run.billable_gpu_seconds == run.gpu_seconds
    finally:
        for job in Job.objects.filter(owner__in=[alice, bob]).exclude(slurm_job_id=None):
            cli.run("scancel", str(job.slurm_job_id), check=False)


@pytest.mark.django_db
def test_the_job_form_offers_spot_with_its_price_share_to_paid_plans_only(alice, client):
    client.force_login(alice)
    page = client.get("/jobs/new/").content.decode()
    assert 'name="spot"' in page and "a100 40 % at night (22:00-06:00), 70 % by day" in page
    assert "signal.signal(signal.SIGTERM, on_notice)" in page  # the checkpointing example
    subscribe(alice, "free")
    assert 'name="spot"' not in client.get("/jobs/new/").content.decode()
