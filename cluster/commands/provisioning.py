"""Making a portal user exist on the cluster: a Unix user on the nodes and a Slurm
association under the portal's account with the plan's QOS.

`local` serves the dev cluster (and small single-host clusters): it creates the Unix
user itself. `external` is for sites where a directory service (LDAP, FreeIPA) owns
Unix users: it only checks that the user exists and manages the association.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from cluster.commands.cli import SlurmCli
from cluster.commands.limits import AssociationLimits
from cluster.errors import SlurmCommandError, SlurmTransientError

_USERNAME = re.compile(r"[a-z_][a-z0-9_-]{0,31}")
# How long removal waits for cancelled jobs to leave before giving the caller a retry.
CANCEL_WAIT_SECONDS = 10.0
# Accounts below this uid belong to the system (Debian's UID_MIN): never a portal user's.
FIRST_USER_UID = 1000


@dataclass(frozen=True)
class ClusterIdentity:
    username: str
    uid: int | None
    gid: int | None


class ProvisioningBackend(Protocol):
    def user_exists(self, username: str) -> bool: ...

    def ensure_user(
        self,
        username: str,
        qos: list[str],
        default_qos: str,
        *,
        gpu_minutes: int | None = None,
        max_submit_jobs: int | None = None,
        expected_uid: int | None = None,
        adopt_existing: bool = False,
        on_claimed: Callable[[ClusterIdentity], None] | None = None,
    ) -> ClusterIdentity: ...

    def remove_user(self, username: str) -> None: ...

    def set_operator(self, username: str, group: str, member: bool) -> None: ...


def _claimed(on_claimed, identity: ClusterIdentity) -> None:
    """The account is this portal user's from here on: the caller records its uid before the
    association is written, so a failure in that step leaves an account that a retry recognises
    as its own (not one that "already exists and is not this portal account's")."""
    if on_claimed is not None:
        on_claimed(identity)


def _check_name(username: str) -> None:
    # fullmatch: re.match(...$) would accept "name\n".
    if not _USERNAME.fullmatch(username):
        raise ValueError(f"{username!r} is not a valid cluster user name")


class _AssociationMixin:
    cli: SlurmCli
    account: str

    def _check_ownership(self, username: str, expected_uid: int | None, adopt_existing: bool) -> None:
        """An existing account is this portal user's only if we recorded its uid when we
        made it, or an admin said so (adopt_existing): otherwise signing up as "carol"
        would hand over the cluster account carol already has."""
        if self.cli.noop:
            return
        identity = self._identity(username)
        if identity.uid is not None and identity.uid < FIRST_USER_UID:
            raise SlurmCommandError(f"cluster user {username} is a system account (uid {identity.uid})")
        if adopt_existing:
            return
        if expected_uid is None or identity.uid != expected_uid:
            raise SlurmCommandError(
                f"cluster user {username} already exists and is not this portal account's; "
                "an admin must map the account explicitly"
            )

    def _identity(self, username: str) -> ClusterIdentity:
        if self.cli.noop:
            return ClusterIdentity(username, None, None)
        entry = self.cli.run("getent", "passwd", username).stdout.strip().split(":")
        return ClusterIdentity(username, int(entry[2]), int(entry[3]))

    def _ensure_association(self, limits: AssociationLimits) -> None:
        # `add user` fails for an existing association and `modify` fails when nothing
        # changes, so neither exit code means much: the association read back decides.
        added = self.cli.add_association(limits.user, self.account, list(limits.qos), limits.default_qos)
        self.cli.set_association_limits(limits)
        if self.cli.noop:
            return
        shown = self.cli.show_association_limits(limits.user).get((limits.user, self.account))
        differences = limits.differences(shown)
        if differences:
            detail = (added.stderr or added.stdout).strip()
            raise SlurmCommandError(
                f"association for {limits.user} in account {self.account} was not set as asked: "
                f"{'; '.join(differences)}{f' ({detail})' if detail else ''}"
            )

    def _limits(self, username, qos, default_qos, gpu_minutes, max_submit_jobs) -> AssociationLimits:
        return AssociationLimits(
            user=username,
            account=self.account,
            qos=tuple(sorted(qos)),
            default_qos=default_qos,
            gpu_minutes=gpu_minutes,
            max_submit_jobs=max_submit_jobs,
        )

    def _remove_association(self, username: str) -> None:
        """Hold new submissions at once, cancel what runs, then delete the association.
        slurmdbd refuses the delete while any job is active ("Job(s) active"), and
        cancelled jobs take a moment to leave: wait a little, then let the caller retry."""
        self.cli.hold_user_submissions(username)
        self.cli.cancel_user_jobs(username)
        if self.cli.noop:
            self.cli.delete_association(username, self.account)
            return
        deadline = time.monotonic() + CANCEL_WAIT_SECONDS
        while True:
            result = self.cli.delete_association(username, self.account)
            shown = self.cli.show_association(username).stdout.splitlines()
            if not any(line.split("|")[1:2] == [self.account] for line in shown):
                return
            if time.monotonic() > deadline:
                detail = (result.stderr or result.stdout).strip()
                raise SlurmTransientError(f"the association of {username} is still there: {detail}")
            time.sleep(0.5)


class LocalProvisioner(_AssociationMixin):
    def __init__(self, cli: SlurmCli, account: str):
        self.cli = cli
        self.account = account

    def user_exists(self, username: str) -> bool:
        if self.cli.noop:
            return False  # a noop run answers "success" to everything; nothing exists
        return self.cli.run("getent", "passwd", username, check=False).returncode == 0

    def ensure_user(
        self,
        username: str,
        qos: list[str],
        default_qos: str,
        *,
        gpu_minutes=None,
        max_submit_jobs=None,
        expected_uid=None,
        adopt_existing=False,
        on_claimed=None,
    ) -> ClusterIdentity:
        _check_name(username)
        if self.cli.noop or not self.user_exists(username):
            self.cli.run("useradd", "--create-home", "--shell", "/bin/bash", "--user-group", username)
            _claimed(on_claimed, self._identity(username))
        else:
            self._check_ownership(username, expected_uid, adopt_existing)
            if adopt_existing:
                _claimed(on_claimed, self._identity(username))
            # Re-activate an account that remove_user locked.
            self.cli.run("usermod", "--expiredate", "-1", "--shell", "/bin/bash", username, check=False)
        self._ensure_association(self._limits(username, qos, default_qos, gpu_minutes, max_submit_jobs))
        return self._identity(username)

    def remove_user(self, username: str) -> None:
        """Stop the user's work on the cluster and lock the Unix account, but keep it: a
        deleted user's uid would be handed to the next new user, and Slurm (which stores
        uids) would then show the old user's jobs as theirs."""
        _check_name(username)
        if self.cli.noop or self.user_exists(username):
            self.cli.run(
                "usermod", "--lock", "--expiredate", "1", "--shell", "/usr/sbin/nologin", username, check=False
            )
        self._remove_association(username)

    def set_operator(self, username: str, group: str, member: bool) -> None:
        """Put the user in (or take them out of) the nodes' operators group: its members may run
        the node-side image tool through sudo (deploy/node/README.md), which the console's image
        operations need. Admins are members; a demoted admin leaves at the next provisioning."""
        _check_name(username)
        if self.cli.noop:
            return
        if self.cli.run("getent", "group", group, check=False).returncode != 0:
            raise SlurmCommandError(f"the operators group {group} does not exist on the cluster (CLUSTER_OPS_GROUP)")
        members = self.cli.run("getent", "group", group).stdout.strip().split(":")[-1].split(",")
        if member and username not in members:
            self.cli.run("usermod", "--append", "--groups", group, username)
        elif not member and username in members:
            self.cli.run("gpasswd", "--delete", username, group)


class ExternalDirectoryProvisioner(_AssociationMixin):
    def __init__(self, cli: SlurmCli, account: str):
        self.cli = cli
        self.account = account

    def user_exists(self, username: str) -> bool:
        if self.cli.noop:
            return False  # a noop run answers "success" to everything; nothing exists
        return self.cli.run("id", username, check=False).returncode == 0

    def ensure_user(
        self,
        username: str,
        qos: list[str],
        default_qos: str,
        *,
        gpu_minutes=None,
        max_submit_jobs=None,
        expected_uid=None,
        adopt_existing=False,
        on_claimed=None,
    ) -> ClusterIdentity:
        _check_name(username)
        if not self.cli.noop and not self.user_exists(username):
            raise SlurmCommandError(f"user {username} does not exist in the directory; create it there first")
        # Every directory user already exists: the mapping must come from an admin.
        self._check_ownership(username, expected_uid, adopt_existing)
        if adopt_existing:
            _claimed(on_claimed, self._identity(username))
        self._ensure_association(self._limits(username, qos, default_qos, gpu_minutes, max_submit_jobs))
        return self._identity(username)

    def remove_user(self, username: str) -> None:
        _check_name(username)
        self._remove_association(username)

    def set_operator(self, username: str, group: str, member: bool) -> None:
        """The directory owns group membership: an admin adds operators there."""


BACKENDS = {"local": LocalProvisioner, "external": ExternalDirectoryProvisioner}


def provisioning_backend(name: str, cli: SlurmCli, account: str) -> ProvisioningBackend:
    try:
        return BACKENDS[name](cli, account)
    except KeyError:
        raise ValueError(f"unknown PROVISIONING_BACKEND {name!r} (known: {', '.join(BACKENDS)})") from None
