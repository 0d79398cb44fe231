"""Groups against the real dev cluster: the account, its shares and members in slurmdbd, a
member's job running with the group's account, an approved allocation as the account's
limits, and Slurm itself refusing a job that would run past it."""

import io
from datetime import timedelta

import pytest
from allauth.account.models import EmailAddress
from django.core.management import call_command
from django.utils import timezone

from cluster.clusters.services import rest_client, slurm_cli
from cluster.commands.accounts import SlurmAccounts
from cluster.errors import SlurmError
from console import lab
from groups import actions, usage
from groups.models import Group
from groups.tasks import differences, sync_group
from jobs import actions as job_actions
from jobs.models import Job
from jobs.submission.spec import SpecError, SpecPolicy, parse_job_spec
from jobs.tasks import submit_claimed
from plans.catalog import plan_for
from testing.slurm import submission, wait_for, wait_for_state

pytestmark = [pytest.mark.slurm, pytest.mark.django_db(transaction=True)]


def _verified(user):
    EmailAddress.objects.create(user=user, email=user.email, verified=True, primary=True)
    return user


@pytest.fixture
def group_accounts():
    """Accounts the test's groups made in slurmdbd, removed afterwards with their members."""
    made: list[Group] = []
    yield made
    accounts = SlurmAccounts(slurm_cli())
    for group in made:
        slurm_cli().run("scancel", f"--account={group.slurm_account}", check=False)
        shown = accounts.show([group.slurm_account]).get(group.slurm_account)
        for user in shown.users if shown else ():
            accounts.remove_member(group.slurm_account, user)
        accounts.delete(group.slurm_account)
        accounts.delete(group.parent_account)


def _sync(group: Group) -> Group:
    sync_group.apply(args=[group.pk]).get()
    group.refresh_from_db()
    assert group.slurm_state == Group.SlurmState.SYNCED, group.slurm_error
    return group


def _spec(user, minutes: int):
    data = {
        "name": "group-job",
        "image": "nvcr.io/nvidia/pytorch:24.05-py3",
        "gpu_type": "a100",
        "gpu_count": 1,
        "command": "sleep 30",
        "time_limit_minutes": minutes,
    }
    return parse_job_spec(data, plan=plan_for(user), policy=SpecPolicy.from_settings())


def test_a_group_is_an_account_with_shares_members_and_the_limits_of_its_allocation(
    alice, bob, admin_user, provision, group_accounts, settings
):
    pi = provision(_verified(alice))
    member = provision(_verified(bob))
    slug = f"lab{timezone.now():%H%M%S%f}"[:20]
    # An organisation of the test's own (a new one is the admins' to make: here the default's).
    settings.GROUP_DEFAULT_ORGANIZATION = f"uni{slug[-6:]}"
    group = actions.create_group(alice, name="Vision lab", slug=slug)
    group_accounts.append(group)
    accounts = SlurmAccounts(slurm_cli())
    _sync(group)
    shown = accounts.show([group.slurm_account])[group.slurm_account]
    assert shown.parent == group.parent_account and shown.users == {pi.cluster_username}
    # No allocation yet: no GPU time at all, by type and in total (shards too).
    assert shown.gpu_minutes["gres/gpu"] == 0 and shown.gpu_minutes["gres/shard:a100"] == 0

    _invitation, token = actions.invite(group.pk, alice, email=bob.email)
    actions.accept_invitation(token, bob)
    actions.set_shares(group.pk, admin_user, 7)
    _sync(group)
    shown = accounts.show([group.slurm_account])[group.slurm_account]
    assert shown.users == {pi.cluster_username, member.cluster_username} and shown.shares == 7
    shares = {row.user: row for row in accounts.shares([group.slurm_account])}
    assert shares[""].raw_shares == 7 and member.cluster_username in shares

    # Drift made by hand in Slurm is reported, and repaired by --sync.
    accounts.remove_member(group.slurm_account, member.cluster_username)
    missing = f"{member.cluster_username} is a member but has no association in {group.slurm_account}"
    assert differences(group) == [missing]
    call_command("groups_check", "--sync", stdout=io.StringIO())
    assert differences(group) == []

    today = timezone.now().date()
    allocation = actions.request_allocation(
        group.pk, alice, gpu_type="a100", gpu_hours=2, starts_on=today, ends_on=today + timedelta(days=90),
        justification="Training the segmentation baseline.",
    )  # fmt: skip
    actions.decide_allocation(allocation.pk, admin_user, approve=True, gpu_hours=1)
    # The member's first job, at once: Slurm does not hold the approved hours yet and would
    # refuse it ("violates accounting/QOS policy"), so it waits for them, saying so.
    job = job_actions.submit(bob, _spec(bob, 20), group_id=group.pk)
    assert job.group_id == group.pk and job.account == group.slurm_account
    job.refresh_from_db()
    assert job.state == "SUBMITTING" and job.slurm_job_id is None
    assert "still being written to Slurm" in job.error
    _sync(group)
    shown = accounts.show([group.slurm_account])[group.slurm_account]
    assert shown.gpu_minutes["gres/gpu:a100"] == 60 and shown.gpu_minutes["gres/shard:a100"] == 600
    assert shown.gpu_minutes["gres/gpu:h100"] == 0 and shown.gpu_minutes["gres/gpu"] == 60

    # Its next try (a worker's retry) finds the hours in Slurm: it runs with the group's account.
    assert submit_claimed(job.pk) in ("submitted", "not-claimable")  # or a worker sent it first

    def in_slurm_or_failed():
        row = Job.objects.filter(pk=job.pk).values("slurm_job_id", "error").first()
        return row["slurm_job_id"] or row["error"]

    slurm_job_id = wait_for(
        in_slurm_or_failed,
        timeout=90,  # a loaded controller may answer the submission slowly; an error ends the wait at once
        what="the group job to reach Slurm",
    )
    assert isinstance(slurm_job_id, int), slurm_job_id
    shown_job = slurm_cli().run("scontrol", "show", "job", str(slurm_job_id)).stdout
    assert f"Account={group.slurm_account}" in shown_job

    # Usage by member comes from Slurm's accounting (a running job counts up to now).
    since = timezone.now() - timedelta(hours=1)
    rows = wait_for(
        lambda: [row for row in usage.gpu_hours_by_member(group, since, timezone.now()) if row["gpu_hours"] > 0],
        timeout=60,
        what="the group job's GPU time in sacct",
    )
    assert {(row["user"], row["gpu_type"]) for row in rows} == {(member.cluster_username, "a100")}
    # The lab view's row for the group: its share from sshare, its hours from sacct.
    figures, error = lab.lab_figures()
    row = next(found for found in figures if found.group.pk == group.pk)
    assert error == "" and row.norm_shares is not None and row.gpu_hours["a100"] > 0

    # Past the allocation: the portal says so with the figures; Slurm refuses it too.
    with pytest.raises(SpecError) as refused:
        job_actions.submit(bob, _spec(bob, 120), group_id=group.pk)
    assert "60 left" in refused.value.errors["group"][0]
    # A member's own submission, not through the portal's check: Slurm holds the line itself.
    with pytest.raises(SlurmError) as by_slurm:
        rest_client(member.cluster_username).submit_job(
            submission(
                "sleep 1", account=group.slurm_account, qos="pro", tres_per_node="gres/gpu:a100:1",
                time_limit_minutes=120,
            )
        )  # fmt: skip
    assert "AssocGrpGRESMinutes" in str(by_slurm.value) or "QOS policy" in str(by_slurm.value)

    # Removing a member with a pending job in the group: no new job may be submitted through
    # the association, their group jobs are cancelled (running ones too: the group pays for
    # them), the association goes once they have left (the sync tries again until then).
    pending = rest_client(member.cluster_username).submit_job(
        submission("sleep 1", account=group.slurm_account, qos="pro", name="held-in-group")
    )
    slurm_cli().run("scontrol", "hold", str(pending))
    actions.remove_member(group.pk, alice, bob.pk)

    def member_gone():
        outcome = sync_group.apply(args=[group.pk])
        if member.cluster_username not in accounts.show([group.slurm_account])[group.slurm_account].users:
            return True
        # What held it back (a running job; anything else fails the test below with its words).
        assert "not removed yet" in Group.objects.get(pk=group.pk).slurm_error or outcome.successful(), outcome.result
        return False

    wait_for(member_gone, timeout=90, interval=2, what="the removed member's association to go")
    assert wait_for_state(rest_client(), pending, {"CANCELLED"}, timeout=30).state == "CANCELLED"

    # Closing: the account leaves Slurm once its jobs have ended (Slurm refuses before).
    slurm_cli().run("scancel", f"--account={group.slurm_account}", check=False)
    actions.close_group(group.pk, alice, "the project ended")

    def account_gone():
        sync_group.apply(args=[group.pk])
        return group.slurm_account not in accounts.show([group.slurm_account])

    wait_for(account_gone, timeout=90, interval=2, what="the closed group's account to leave Slurm")
    assert Group.objects.get(pk=group.pk).slurm_state == Group.SlurmState.SYNCED


def test_a_free_members_budget_binds_in_a_group_that_holds_no_plan(alice, bob, admin_user, provision, group_accounts,
                                                                     settings):  # fmt: skip
    """A Free member of a group without a plan ran group jobs past Free's 10 GPU-hours at $0: the
    association in the group's account had the plan's QOS but not its budget."""
    from conftest import subscribe
    from groups.models import GroupPlan

    subscribe(bob, "free")
    provision(_verified(alice))
    member = provision(_verified(bob))
    slug = f"cap{timezone.now():%H%M%S%f}"[:20]
    settings.GROUP_DEFAULT_ORGANIZATION = f"uni{slug[-6:]}"
    group = actions.create_group(alice, name="Capped lab", slug=slug)
    group_accounts.append(group)
    _invitation, token = actions.invite(group.pk, alice, email=bob.email)
    actions.accept_invitation(token, bob)
    _sync(group)

    def budget() -> str:
        shown = slurm_cli().run(
            "sacctmgr", "-n", "-P", "show", "assoc", f"users={member.cluster_username}",
            f"accounts={group.slurm_account}", "format=User,GrpTRESMins",
        )  # fmt: skip
        return shown.stdout.strip()

    assert budget() == f"{member.cluster_username}|gres/gpu={plan_for(bob).monthly_gpu_minutes_cap}"
    # A group that pays for its jobs under its own plan: the member's own budget is not its limit.
    actions.set_group_plan(group.pk, admin_user, "pro")
    assert GroupPlan.objects.filter(group=group, ended_at__isnull=True).exists()
    _sync(group)
    assert budget() == f"{member.cluster_username}|"
