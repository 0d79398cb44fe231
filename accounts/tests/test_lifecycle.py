"""Accounts that end, come back or change plan: what follows on the real cluster."""

import pytest
from asgiref.sync import async_to_sync
from django.conf import settings
from django.core.management import call_command
from django.core.management.base import CommandError

from accounts.actions import lifecycle
from audit.models import AuditLog
from cluster.clusters.services import slurm_cli
from cluster.errors import SlurmError
from jobs.models import Job, JobState
from jobs.receivers import DEACTIVATED_MESSAGE
from jobs.tasks import reconcile_submissions, submit_to_slurm
from testing.slurm import submission, unique_cluster_name, wait_for_state

pytestmark = pytest.mark.django_db(transaction=True)
# Each test that needs the dev cluster says so (`slurm`); the others run without it.


def _association(name: str) -> str:
    return slurm_cli().show_association(name).stdout.strip()


def _passwd_shell(name: str) -> str:
    return slurm_cli().run("getent", "passwd", name).stdout.strip().split(":")[-1]


def _waiting_row(user, cluster_user: str) -> Job:
    return Job.objects.create(owner=user, cluster_user=cluster_user, state=JobState.SUBMITTING, name="waiting")


@pytest.mark.slurm
def test_deactivation_stops_everything_and_reactivation_restores_it(alice, admin_user, provision, slurm, eager_tasks):
    profile = provision(alice)
    name = profile.cluster_username
    # A job submitted outside the portal (as from a login node) and one still on its way.
    running_id = slurm.as_user(name).submit_job(submission("sleep 300"))
    wait_for_state(slurm, running_id, {"RUNNING", "PENDING"})
    waiting = _waiting_row(alice, name)

    assert lifecycle.deactivate(alice, actor=admin_user, reason="left the lab")
    assert not lifecycle.deactivate(alice, actor=admin_user)  # a second press changes nothing

    waiting.refresh_from_db()
    assert waiting.state == JobState.SUBMIT_FAILED and waiting.error == DEACTIVATED_MESSAGE
    wait_for_state(slurm, running_id, {"CANCELLED"})
    assert _association(name) == ""
    assert _passwd_shell(name) == "/usr/sbin/nologin"
    profile.refresh_from_db()
    assert profile.provisioned_at is None and profile.cluster_uid is not None  # the uid is kept
    # Slurm itself refuses the account now, whatever submits for it.
    with pytest.raises(SlurmError):
        slurm.as_user(name).submit_job(submission("true"))
    # A submission that arrives late is refused by the worker and skipped by the reconciler.
    late = _waiting_row(alice, name)
    assert submit_to_slurm.run(late.pk) == "owner-inactive"
    late.refresh_from_db()
    assert late.state == JobState.SUBMIT_FAILED
    assert reconcile_submissions.run() == 0

    entry = AuditLog.objects.get(action="account.deactivate")
    assert entry.actor == admin_user and entry.reason == "left the lab"
    assert entry.before == {"is_active": True} and entry.after == {"is_active": False}

    assert lifecycle.reactivate(alice, actor=admin_user)
    profile.refresh_from_db()
    assert profile.provisioned_at is not None and profile.provisioning_error == ""
    assert _association(name) == f"{name}|{settings.SLURM_ACCOUNT}|pro,spot|pro"
    assert _passwd_shell(name) == "/bin/bash"
    job_id = slurm.as_user(name).submit_job(submission("true"))
    wait_for_state(slurm, job_id, {"COMPLETED"})
    assert AuditLog.objects.filter(action="account.reactivate", actor=admin_user).count() == 1


@pytest.mark.slurm
def test_saving_an_inactive_user_in_the_admin_takes_the_same_path(alice, provision, slurm, eager_tasks):
    name = provision(alice).cluster_username
    alice.is_active = False
    alice.save()
    assert _association(name) == ""
    assert AuditLog.objects.filter(action="account.deactivate", target=f"user:{alice.username}").exists()


@pytest.mark.slurm
def test_deleting_a_user_locks_their_cluster_account(alice, provision, slurm, eager_tasks):
    name = provision(alice).cluster_username
    running_id = slurm.as_user(name).submit_job(submission("sleep 300"))
    alice.delete()
    wait_for_state(slurm, running_id, {"CANCELLED"})
    assert _association(name) == ""
    assert _passwd_shell(name) == "/usr/sbin/nologin"
    assert AuditLog.objects.get(action="account.delete").parameters == {"cluster_user": name}


@pytest.mark.slurm
def test_a_plan_change_is_enforced_by_slurm(alice, provision, slurm, eager_tasks):
    name = provision(alice).cluster_username
    assert _association(name).endswith("|pro,spot|pro")
    lifecycle.change_plan(alice, "free", actor=None)
    assert _association(name) == f"{name}|{settings.SLURM_ACCOUNT}|free|free"
    # Slurm now refuses the QOS the old plan had.
    with pytest.raises(SlurmError):
        slurm.as_user(name).submit_job(submission("true", qos="premium"))
    entry = AuditLog.objects.get(action="subscription.change")
    assert entry.before["plan"] == "pro" and entry.after["plan"] == "free"


@pytest.mark.parametrize("system_name", ["root", "slurm", "munge"])
def test_provision_user_refuses_system_accounts_by_name(alice, system_name):
    with pytest.raises(CommandError, match="system account"):
        call_command("provision_user", alice.username, cluster_user=system_name, adopt=True)
    alice.profile.refresh_from_db()
    assert alice.profile.cluster_username is None


@pytest.mark.slurm
def test_provision_user_refuses_a_system_uid_even_when_adopting(alice):
    cli = slurm_cli()
    name = unique_cluster_name("sys")
    cli.run("useradd", "--system", "--shell", "/usr/sbin/nologin", name)
    try:
        with pytest.raises(CommandError, match="system account"):
            call_command("provision_user", alice.username, cluster_user=name, adopt=True)
        assert _association(name) == ""
    finally:
        cli.run("userdel", name, check=False)


def test_the_socket_of_a_deactivated_user_is_closed(alice):
    from jobs.tests.test_consumer import _connect, _session_cookie

    cookie = _session_cookie(alice)

    async def scenario():
        from asgiref.sync import sync_to_async

        communicator, connected = await _connect(cookie)
        assert connected
        await sync_to_async(lifecycle.deactivate)(alice)
        closed = await communicator.receive_output(timeout=5)
        _again, reconnected = await _connect(cookie)
        return closed, reconnected

    closed, reconnected = async_to_sync(scenario)()
    assert closed == {"type": "websocket.close", "code": 4403}
    assert reconnected is False
