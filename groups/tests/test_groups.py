"""Groups' rules, as their users meet them: who may create, invite, join, remove, ask for
and decide allocations; what a non-member sees (nothing: a 404); every refusal says why and
changes nothing."""

from datetime import timedelta

import pytest
from allauth.account.models import EmailAddress
from django.contrib.auth import get_user_model
from django.utils import timezone

from audit.models import AuditLog
from groups import actions
from groups.models import Allocation, Group, GroupRole, Invitation, Membership
from groups.queries import GroupError, default_group, gpu_minutes_left, group_to_charge

pytestmark = pytest.mark.django_db


def _verified(user, email=None):
    EmailAddress.objects.create(user=user, email=email or user.email, verified=True, primary=True)
    return user


@pytest.fixture
def lab(alice):
    _verified(alice)
    return actions.create_group(alice, name="Vision lab", slug="vision")


def _refused(call, status, field=None):
    with pytest.raises(GroupError) as refused:
        call()
    assert refused.value.status == status, refused.value.message
    if field:
        assert refused.value.field == field
    return refused.value


def test_a_verified_user_creates_a_group_and_is_its_pi(alice):
    _refused(lambda: actions.create_group(alice, name="Lab", slug="lab"), 403)  # not verified yet
    assert not Group.objects.exists()
    _verified(alice)
    group = actions.create_group(alice, name="Lab", slug="lab")
    assert Membership.objects.get(group=group).role == GroupRole.PI
    assert group.slurm_account == "g-lab" and group.parent_account == "o-pool"
    assert AuditLog.objects.filter(action="group.create", target="group:lab").exists()


@pytest.mark.parametrize("slug", ["", "A", "1lab", "lab space", "x" * 31, "lab;rm"])
def test_a_bad_short_name_is_refused_and_writes_nothing(alice, slug):
    _verified(alice)
    error = _refused(lambda: actions.create_group(alice, name="Lab", slug=slug), 400, "slug")
    assert error.message and not Group.objects.exists()


def test_a_taken_short_name_is_a_conflict(lab, bob):
    _verified(bob)
    _refused(lambda: actions.create_group(bob, name="Other", slug="vision"), 409, "slug")


def test_without_self_service_only_admins_create_groups(alice, admin_user, settings):
    settings.GROUPS_SELF_SERVICE = False
    _verified(alice)
    _refused(lambda: actions.create_group(alice, name="Lab", slug="lab"), 403)
    assert actions.create_group(admin_user, name="Lab", slug="lab").created_by == admin_user


def test_an_invitation_is_accepted_by_the_invited_verified_address_only(
    lab, alice, bob, mailoutbox, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True):
        _invitation, token = actions.invite(lab.pk, alice, email="Bob@X.org")
    assert mailoutbox[0].to == ["bob@x.org"] and f"/groups/invitations/{token}/" in mailoutbox[0].body
    assert Invitation.objects.get().token_hash != token  # only the hash is kept
    _refused(lambda: actions.accept_invitation(token, bob), 403)  # bob has not verified bob@x.org
    _verified(bob)
    _refused(lambda: actions.accept_invitation("not-a-token", bob), 404)
    joined = actions.accept_invitation(token, bob)
    assert joined.role == GroupRole.MEMBER
    _refused(lambda: actions.accept_invitation(token, bob), 409)  # accepted already


def test_someone_else_cannot_use_a_forwarded_invitation(lab, alice, bob):
    _invitation, token = actions.invite(lab.pk, alice, email="carol@x.org")
    _verified(bob)
    _refused(lambda: actions.accept_invitation(token, bob), 403)
    assert not Membership.objects.filter(user=bob).exists()


def test_an_expired_or_revoked_invitation_does_nothing(lab, alice, bob):
    _verified(bob)
    invitation, token = actions.invite(lab.pk, alice, email=bob.email)
    Invitation.objects.filter(pk=invitation.pk).update(expires_at=timezone.now() - timedelta(seconds=1))
    _refused(lambda: actions.accept_invitation(token, bob), 409)
    invitation, token = actions.invite(lab.pk, alice, email=bob.email)  # a new one replaces it
    actions.revoke_invitation(lab.pk, invitation.pk, alice)
    _refused(lambda: actions.accept_invitation(token, bob), 409)
    assert not Membership.objects.filter(user=bob).exists()


def _member(group, user, role=GroupRole.MEMBER):
    return Membership.objects.create(group=group, user=user, role=role)


def test_members_do_not_invite_and_outsiders_learn_nothing(lab, bob):
    outsider = get_user_model().objects.create_user("carol", "carol@x.org", "pw")
    _refused(lambda: actions.invite(lab.pk, outsider, email="d@x.org"), 404)
    _member(lab, bob)
    _refused(lambda: actions.invite(lab.pk, bob, email="d@x.org"), 403)
    assert not Invitation.objects.exists()


def test_the_pi_cannot_leave_a_member_can_and_only_the_pi_removes_managers(lab, alice, bob):
    _refused(lambda: actions.remove_member(lab.pk, alice, alice.pk), 409)
    carol = get_user_model().objects.create_user("carol", "carol@x.org", "pw")
    _member(lab, bob, GroupRole.MANAGER)
    _member(lab, carol, GroupRole.MANAGER)
    _refused(lambda: actions.remove_member(lab.pk, bob, carol.pk), 403)
    actions.remove_member(lab.pk, carol, carol.pk)  # leaving
    assert not Membership.objects.active().filter(user=carol).exists()
    actions.remove_member(lab.pk, alice, bob.pk)
    assert Membership.objects.filter(user=bob, left_at__isnull=False).exists()  # the row stays


def test_handing_the_group_over_keeps_one_pi(lab, alice, bob):
    _member(lab, bob)
    _refused(lambda: actions.change_role(lab.pk, bob, alice.pk, GroupRole.MEMBER), 403)
    actions.change_role(lab.pk, alice, bob.pk, GroupRole.PI)
    roles = dict(Membership.objects.active().values_list("user__username", "role"))
    assert roles == {"alice": GroupRole.MANAGER, "bob": GroupRole.PI}


def _ask(group, user, **overrides):
    today = timezone.now().date()
    values = {
        "gpu_type": "a100",
        "gpu_hours": 100,
        "starts_on": today,
        "ends_on": today + timedelta(days=90),
        "justification": "Training the segmentation baseline.",
        **overrides,
    }
    return actions.request_allocation(group.pk, user, **values)


def test_allocations_are_asked_by_managers_and_decided_by_an_admin_outside_the_group(lab, alice, bob, admin_user):
    _member(lab, bob)
    _refused(lambda: _ask(lab, bob), 403)
    _refused(lambda: _ask(lab, alice, gpu_type="tpu"), 400, "gpu_type")
    _refused(lambda: _ask(lab, alice, justification="gpu"), 400, "justification")
    today = timezone.now().date()
    _refused(lambda: _ask(lab, alice, ends_on=today + timedelta(days=400)), 400, "ends_on")
    allocation = _ask(lab, alice)
    _refused(lambda: actions.decide_allocation(allocation.pk, alice, approve=True), 403)
    _member(lab, admin_user)
    _refused(lambda: actions.decide_allocation(allocation.pk, admin_user, approve=True), 403)
    Membership.objects.filter(user=admin_user).update(left_at=timezone.now() - timedelta(days=91))
    _refused(lambda: actions.decide_allocation(allocation.pk, admin_user, approve=False), 400, "note")
    decided = actions.decide_allocation(allocation.pk, admin_user, approve=True, gpu_hours=40, note="Start small")
    assert decided.state == Allocation.State.APPROVED and decided.approved_gpu_hours == 40
    _refused(lambda: actions.decide_allocation(allocation.pk, admin_user, approve=True), 409)
    assert gpu_minutes_left(lab, "a100", today) == 40 * 60
    Allocation.objects.filter(pk=allocation.pk).update(used_gpu_minutes=2000)
    assert gpu_minutes_left(lab, "a100", today) == 400
    assert gpu_minutes_left(lab, "h100", today) == 0


def test_a_job_is_charged_only_to_a_group_of_ones_own_that_slurm_has(lab, alice, bob):
    _refused(lambda: group_to_charge(bob, lab.pk), 400, "group")
    _refused(lambda: group_to_charge(alice, "abc"), 400, "group")
    _refused(lambda: group_to_charge(alice, lab.pk), 400, "group")  # not in Slurm yet
    Group.objects.filter(pk=lab.pk).update(synced_at=timezone.now())
    assert group_to_charge(alice, lab.pk) == lab
    assert default_group(alice) is None
    actions.set_default_group(alice, lab.pk)
    assert default_group(alice) == lab
    _refused(lambda: actions.set_default_group(bob, lab.pk), 404)


def test_only_admins_set_shares(lab, alice, admin_user):
    _refused(lambda: actions.set_shares(lab.pk, alice, 100), 403)
    _refused(lambda: actions.set_shares(lab.pk, admin_user, 0), 400)
    assert actions.set_shares(lab.pk, admin_user, 25).shares == 25


def test_a_withdrawn_request_is_not_decided_and_another_groups_request_is_not_found(lab, alice, bob, admin_user):
    allocation = _ask(lab, alice)
    _verified(bob)
    other = actions.create_group(bob, name="Other", slug="other")
    _refused(lambda: actions.withdraw_allocation(other.pk, allocation.pk, bob), 404)
    assert actions.withdraw_allocation(lab.pk, allocation.pk, alice).state == Allocation.State.WITHDRAWN
    _refused(lambda: actions.withdraw_allocation(lab.pk, allocation.pk, alice), 409)
    _refused(lambda: actions.decide_allocation(allocation.pk, admin_user, approve=True), 409)


def test_the_pi_closes_the_group_and_everything_ends_with_it(lab, alice, bob):
    _member(lab, bob)
    invitation, _token = actions.invite(lab.pk, alice, email="carol@x.org")
    _refused(lambda: actions.close_group(lab.pk, bob, "no"), 403)
    closed = actions.close_group(lab.pk, alice, "the project ended")
    assert closed.closed_at is not None and closed.slurm_state == Group.SlurmState.PENDING
    assert not Membership.objects.active().filter(group=lab).exists()
    assert Invitation.objects.get(pk=invitation.pk).state == Invitation.State.REVOKED
    _refused(lambda: actions.close_group(lab.pk, alice), 404)  # no longer a member: the group is gone for her
    _refused(lambda: group_to_charge(alice, lab.pk), 400, "group")


def test_an_admin_does_not_decide_or_set_shares_for_a_group_they_were_lately_in(lab, alice, admin_user):
    allocation = _ask(lab, alice)
    _member(lab, admin_user)
    _refused(lambda: actions.set_shares(lab.pk, admin_user, 500_000), 403)
    Membership.objects.filter(user=admin_user).update(left_at=timezone.now())
    # Left a moment ago: still theirs to stay out of.
    _refused(lambda: actions.decide_allocation(allocation.pk, admin_user, approve=True), 403)
    Membership.objects.filter(user=admin_user).update(left_at=timezone.now() - timedelta(days=91))
    assert actions.decide_allocation(allocation.pk, admin_user, approve=True).state == Allocation.State.APPROVED


def test_nothing_is_decided_or_asked_for_a_closed_group(lab, alice, admin_user):
    allocation = _ask(lab, alice)
    actions.close_group(lab.pk, admin_user, "audit")
    _refused(lambda: actions.decide_allocation(allocation.pk, admin_user, approve=True), 409)
    _refused(lambda: actions.set_shares(lab.pk, admin_user, 5), 409)


def test_self_service_has_limits(alice, settings):
    _verified(alice)
    settings.GROUPS_PER_USER = 1
    _refused(lambda: actions.create_group(alice, name="Lab", slug="lab", organization="newuni"), 403, "organization")
    actions.create_group(alice, name="Lab", slug="lab")
    _refused(lambda: actions.create_group(alice, name="Lab 2", slug="lab2"), 409)


def test_a_default_group_is_checked_like_a_named_one(lab, alice):
    from jobs.actions import DEFAULT_GROUP, charged_group
    from jobs.submission.spec import SpecError

    actions.set_default_group(alice, lab.pk)
    with pytest.raises(SpecError) as refused:
        charged_group(alice, DEFAULT_GROUP)
    assert "not ready" in refused.value.errors["group"][0]  # its account is not in Slurm yet
    Group.objects.filter(pk=lab.pk).update(synced_at=timezone.now())
    assert charged_group(alice, DEFAULT_GROUP) == lab


def test_a_change_slurm_must_learn_holds_group_jobs_until_a_sync_after_it_wrote_it(lab, alice, admin_user):
    from cluster.errors import SlurmTransientError
    from groups.queries import GroupNotInSlurmYet, require_in_slurm
    from groups.tasks import mark_synced

    assert mark_synced(lab.pk)
    require_in_slurm(lab.pk)  # synced: a job goes
    read_by_a_sync = Group.objects.get(pk=lab.pk).slurm_version
    # An admin approves hours while that sync is writing what it read before.
    actions.decide_allocation(_ask(lab, alice).pk, admin_user, approve=True)
    lab.refresh_from_db()
    assert lab.slurm_state == Group.SlurmState.PENDING and lab.slurm_version > read_by_a_sync
    with pytest.raises(GroupNotInSlurmYet) as held:
        require_in_slurm(lab.pk)
    assert isinstance(held.value, SlurmTransientError)  # a submission retries, as while Slurm is away
    assert "Vision lab" in held.value.public_message and "still being written to Slurm" in held.value.public_message
    # That sync ends: it wrote the state before the approval, so the group stays pending ...
    assert not mark_synced(lab.pk, read_by_a_sync)
    assert Group.objects.get(pk=lab.pk).slurm_state == Group.SlurmState.PENDING
    # ... until the sync sent on the approval's commit, which read it, has written it.
    assert mark_synced(lab.pk, Group.objects.get(pk=lab.pk).slurm_version)
    require_in_slurm(lab.pk)
