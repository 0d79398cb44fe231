"""Identity: a portal user becomes a Unix user and a Slurm association in the dev cluster."""

import pytest
from django.conf import settings

from accounts import actions
from accounts.models import Profile
from cluster.clusters.services import slurm_cli
from cluster.commands.provisioning import provisioning_backend
from conftest import subscribe
from testing.slurm import unique_cluster_name

pytestmark = pytest.mark.django_db


def test_cluster_usernames_are_unix_safe_and_unique(alice):
    assert actions.cluster_username_for("Alice.Smith@Lab") == "alicesmithlab"
    assert actions.cluster_username_for("9lives") == "u9lives"
    assert actions.cluster_username_for("root") == "u_root"
    assert actions.cluster_username_for("slurm") == "u_slurm"
    Profile.objects.filter(pk=alice.profile.pk).update(cluster_username="carol")
    assert actions.cluster_username_for("carol") == "carol2"


def test_noop_provisioning_runs_nothing_but_records_the_commands(alice, settings):
    settings.SLURM_CLI_NOOP = True
    settings.SLURM_CLI_PREFIX = ["/nonexistent/prefix"]
    profile = actions.provision(alice.profile.pk)
    assert profile.cluster_username == "alice"
    assert profile.provisioned_at is not None


@pytest.mark.slurm
def test_local_backend_creates_the_unix_user_and_an_association_with_the_plan_qos(alice):
    name = unique_cluster_name("ptp")
    subscribe(alice, "free")
    try:
        profile = actions.provision(alice.profile.pk, preferred_name=name)
        assert profile.cluster_username == name and profile.provisioning_error == ""
        cli = slurm_cli()
        passwd = cli.run("getent", "passwd", name).stdout.split(":")
        assert passwd[0] == name
        assert (profile.cluster_uid, profile.cluster_gid) == (int(passwd[2]), int(passwd[3]))
        assert profile.cluster_uid != 0
        assert cli.show_association(name).stdout.strip() == f"{name}|{settings.SLURM_ACCOUNT}|free|free"

        # A plan change is applied by provisioning again.
        subscribe(alice, "pro")
        actions.provision(alice.profile.pk)
        assert cli.show_association(name).stdout.strip() == f"{name}|{settings.SLURM_ACCOUNT}|pro,spot|pro"
    finally:
        provisioning_backend("local", slurm_cli(), settings.SLURM_ACCOUNT).remove_user(name)
    # Removed means: no association, account locked, uid kept so it is never reused.
    assert slurm_cli().show_association(name).stdout.strip() == ""
    assert slurm_cli().run("getent", "passwd", name).stdout.strip().endswith(":/usr/sbin/nologin")
    assert slurm_cli().run("getent", "shadow", name).stdout.split(":")[1].startswith("!")


@pytest.mark.slurm
def test_a_failure_is_recorded_on_the_profile_and_a_retry_finishes_the_account(alice, settings):
    account = settings.SLURM_ACCOUNT
    settings.SLURM_ACCOUNT = "no_such_account"
    with pytest.raises(Exception, match="association"):
        actions.provision(alice.profile.pk, preferred_name=unique_cluster_name("ptf"))
    profile = Profile.objects.get(pk=alice.profile.pk)
    try:
        assert "association" in profile.provisioning_error
        assert profile.provisioned_at is None
        # The Unix user was made before the association failed: it is recorded as alice's, so
        # the retry (the task's, or a plan change's) takes it up instead of refusing it as foreign.
        passwd = slurm_cli().run("getent", "passwd", profile.cluster_username).stdout.split(":")
        assert profile.cluster_uid == int(passwd[2])
        settings.SLURM_ACCOUNT = account
        retried = actions.provision(alice.profile.pk)
        assert retried.provisioned_at is not None and retried.provisioning_error == ""
        assert retried.cluster_uid == profile.cluster_uid
    finally:
        provisioning_backend("local", slurm_cli(), account).remove_user(profile.cluster_username)


@pytest.mark.slurm
def test_signing_up_as_an_existing_cluster_user_never_takes_that_account_over(alice, bob):
    cli = slurm_cli()
    existing = unique_cluster_name("ptx")
    cli.run("useradd", "--user-group", existing)  # somebody's account, made outside the portal
    try:
        # bob signed up with that name: he gets a name of his own, not the account.
        type(bob).objects.filter(pk=bob.pk).update(username=existing)
        bob.refresh_from_db()
        profile = actions.provision(bob.profile.pk)
        assert profile.cluster_username == f"{existing}2"
        # Asking for the name outright is refused and recorded, not adopted.
        with pytest.raises(Exception, match="already exists"):
            actions.provision(alice.profile.pk, preferred_name=existing)
        alice.profile.refresh_from_db()
        assert "already exists" in alice.profile.provisioning_error and alice.profile.provisioned_at is None
    finally:
        backend = provisioning_backend("local", cli, settings.SLURM_ACCOUNT)
        backend.remove_user(existing)
        backend.remove_user(f"{existing}2")


@pytest.mark.slurm
def test_an_admin_maps_a_portal_account_to_an_existing_cluster_account(alice):
    from django.core.management import call_command

    cli = slurm_cli()
    existing = unique_cluster_name("pty")
    cli.run("useradd", "--user-group", existing)
    try:
        call_command("provision_user", "alice", cluster_user=existing, adopt=True)
        profile = Profile.objects.get(user=alice)
        assert profile.cluster_username == existing and profile.provisioned_at is not None
        assert profile.cluster_uid == int(cli.run("getent", "passwd", existing).stdout.split(":")[2])
    finally:
        provisioning_backend("local", cli, settings.SLURM_ACCOUNT).remove_user(existing)
