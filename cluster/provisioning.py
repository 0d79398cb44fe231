"""Making a portal user exist on the cluster: a Unix user on the nodes and a Slurm
association under the portal's account with the plan's QOS.

`local` serves the dev cluster (and small single-host clusters): it creates the Unix
user itself. `external` is for sites where a directory service (LDAP, FreeIPA) owns
Unix users: it only checks that the user exists and manages the association.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Protocol

from cluster.cli import SlurmCli
from cluster.errors import SlurmCommandError

_USERNAME = re.compile(r"^[a-z_][a-z0-9_-]{0,31}$")


@dataclass(frozen=True)
class ClusterIdentity:
    username: str
    uid: int | None
    gid: int | None


class ProvisioningBackend(Protocol):
    def user_exists(self, username: str) -> bool: ...

    def ensure_user(
        self, username: str, qos: list[str], default_qos: str, *, expected_uid: int | None, adopt_existing: bool
    ) -> ClusterIdentity: ...

    def remove_user(self, username: str) -> None: ...


def _check_name(username: str) -> None:
    if not _USERNAME.match(username):
        raise ValueError(f"{username!r} is not a valid cluster user name")


class _AssociationMixin:
    cli: SlurmCli
    account: str

    def _check_ownership(self, username: str, expected_uid: int | None, adopt_existing: bool) -> None:
        """An existing account is this portal user's only if we recorded its uid when we
        made it, or an admin said so (adopt_existing): otherwise signing up as "carol"
        would hand over the cluster account carol already has."""
        if adopt_existing or self.cli.noop:
            return
        identity = self._identity(username)
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

    def _ensure_association(self, username: str, qos: list[str], default_qos: str) -> None:
        # `add user` fails for an existing association and `modify` fails when nothing
        # changes, so neither exit code means much: the association read back decides.
        added = self.cli.add_association(username, self.account, qos, default_qos)
        self.cli.set_user_qos(username, qos, default_qos)
        if self.cli.noop:
            return
        expected = f"{username}|{self.account}|{','.join(sorted(qos))}|{default_qos}"
        shown = self.cli.show_association(username).stdout.strip().splitlines()
        if expected not in shown:
            detail = (added.stderr or added.stdout).strip()
            raise SlurmCommandError(
                f"association for {username} in account {self.account} with QOS {','.join(qos)} "
                f"was not created: {detail or shown}"
            )


class LocalProvisioner(_AssociationMixin):
    def __init__(self, cli: SlurmCli, account: str):
        self.cli = cli
        self.account = account

    def user_exists(self, username: str) -> bool:
        if self.cli.noop:
            return False  # a noop run answers "success" to everything; nothing exists
        return self.cli.run("getent", "passwd", username, check=False).returncode == 0

    def ensure_user(
        self, username: str, qos: list[str], default_qos: str, *, expected_uid=None, adopt_existing=False
    ) -> ClusterIdentity:
        _check_name(username)
        if self.cli.noop or not self.user_exists(username):
            self.cli.run("useradd", "--create-home", "--shell", "/bin/bash", "--user-group", username)
        else:
            self._check_ownership(username, expected_uid, adopt_existing)
            # Re-activate an account that remove_user locked.
            self.cli.run("usermod", "--expiredate", "-1", "--shell", "/bin/bash", username, check=False)
        self._ensure_association(username, qos, default_qos)
        return self._identity(username)

    def remove_user(self, username: str) -> None:
        """Delete the association and lock the Unix account, but keep it: a deleted user's
        uid would be handed to the next new user, and Slurm (which stores uids) would then
        show the old user's jobs as theirs."""
        _check_name(username)
        self.cli.run("sacctmgr", "-i", "delete", "user", "where", f"name={username}", check=False)
        if self.cli.noop or self.user_exists(username):
            self.cli.run(
                "usermod", "--lock", "--expiredate", "1", "--shell", "/usr/sbin/nologin", username, check=False
            )


class ExternalDirectoryProvisioner(_AssociationMixin):
    def __init__(self, cli: SlurmCli, account: str):
        self.cli = cli
        self.account = account

    def user_exists(self, username: str) -> bool:
        if self.cli.noop:
            return False  # a noop run answers "success" to everything; nothing exists
        return self.cli.run("id", username, check=False).returncode == 0

    def ensure_user(
        self, username: str, qos: list[str], default_qos: str, *, expected_uid=None, adopt_existing=False
    ) -> ClusterIdentity:
        _check_name(username)
        if not self.cli.noop and not self.user_exists(username):
            raise SlurmCommandError(f"user {username} does not exist in the directory; create it there first")
        # Every directory user already exists: the mapping must come from an admin.
        self._check_ownership(username, expected_uid, adopt_existing)
        self._ensure_association(username, qos, default_qos)
        return self._identity(username)

    def remove_user(self, username: str) -> None:
        _check_name(username)
        self.cli.run("sacctmgr", "-i", "delete", "user", "where", f"name={username}", check=False)


BACKENDS = {"local": LocalProvisioner, "external": ExternalDirectoryProvisioner}


def provisioning_backend(name: str, cli: SlurmCli, account: str) -> ProvisioningBackend:
    try:
        return BACKENDS[name](cli, account)
    except KeyError:
        raise ValueError(f"unknown PROVISIONING_BACKEND {name!r} (known: {', '.join(BACKENDS)})") from None
