"""Slurm accounts that hold a group's structure: an account per group under its
organisation's account, under the pool's root; shares (`Fairshare`) that feed fair-share
priority; the group's limits as account limits; its members as associations.

Verified on 24.11 and 26.05 with the dev cluster:
- `sacctmgr -i add account NAME Parent=P Fairshare=N Description=D Organization=O` makes the
  account; `modify account where name=NAME set Fairshare=N GrpTRES=... GrpTRESMins=...`
  changes it, and `-1` clears a limit.
- `show assoc where accounts=A format=Account,User,ParentName,Fairshare,GrpTRES,GrpTRESMins`
  gives the account's own row (no user) and one row per member.
- `sshare -n -P -a -A A,B -o Account,User,RawShares,NormShares,RawUsage,EffectvUsage,FairShare`
  indents user rows' account with a space; an account row has no FairShare value.
- Limits are enforced with `AccountingStorageEnforce=...,safe`: a job that could overrun the
  account's GrpTRESMins is held (reason AssocGrpGRESMinutes), never started.

Names and numbers only: no product knowledge (which group, whose money) lives here.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal, InvalidOperation

from cluster.commands.cli import CommandResult, SlurmCli
from cluster.commands.limits import CLEAR, format_tres
from cluster.commands.queue import parse_slurm_time
from cluster.errors import SlurmCommandError
from cluster.records.gres import parse_tres

# Slurm lower-cases account names; ours are short and safe in any shell or file name.
ACCOUNT_NAME = re.compile(r"[a-z][a-z0-9_-]{0,39}")
ACCOUNT_FORMAT = "format=Account,User,ParentName,Fairshare,GrpTRES,GrpTRESMins,GrpSubmit"
SHARE_FORMAT = "Account,User,RawShares,NormShares,RawUsage,EffectvUsage,FairShare"


def check_account_name(name: str) -> str:
    if not ACCOUNT_NAME.fullmatch(name):
        raise ValueError(f"{name!r} is not a valid Slurm account name (a-z, 0-9, _ and -, at most 40)")
    return name


@dataclass(frozen=True)
class AccountSpec:
    """What an account should be. Limits are TRES -> number ({"gres/gpu:a100": 2}); an empty
    mapping means no limit."""

    name: str
    parent: str
    shares: int = 1
    gpus_at_once: Mapping[str, int] = field(default_factory=dict)  # GrpTRES
    gpu_minutes: Mapping[str, int] = field(default_factory=dict)  # GrpTRESMins
    held: bool = False  # GrpSubmitJobs=0: no new job through the account (a group being closed)

    def set_arguments(self, shown: AccountShown | None = None) -> list[str]:
        """The `set` words that make the account so; limits it no longer has are cleared."""
        arguments = [f"Fairshare={self.shares}", f"GrpSubmitJobs={0 if self.held else CLEAR}"]
        for key, want, have in (
            ("GrpTRES", self.gpus_at_once, shown.gpus_at_once if shown else {}),
            ("GrpTRESMins", self.gpu_minutes, shown.gpu_minutes if shown else {}),
        ):
            cleared = {tres: CLEAR for tres in have if tres not in want}
            if want or cleared:
                arguments.append(f"{key}={format_tres({**cleared, **want})}")
        return arguments

    def differences(self, shown: AccountShown | None) -> list[str]:
        if shown is None:
            return [f"account {self.name} does not exist"]
        found = []
        for label, want, have in (
            ("parent", self.parent, shown.parent),
            ("Fairshare", self.shares, shown.shares),
            ("GrpTRES", dict(self.gpus_at_once), dict(shown.gpus_at_once)),
            ("GrpTRESMins", dict(self.gpu_minutes), dict(shown.gpu_minutes)),
            ("GrpSubmitJobs", 0 if self.held else None, shown.submit_jobs),
        ):
            if want != have:
                found.append(f"account {self.name}: {label} is {have}, the portal says {want}")
        return found


@dataclass(frozen=True)
class AccountShown:
    name: str
    parent: str
    shares: int | None
    gpus_at_once: Mapping[str, int]
    gpu_minutes: Mapping[str, int]
    users: frozenset[str]
    submit_jobs: int | None = None  # GrpSubmitJobs


def parse_accounts(text: str) -> dict[str, AccountShown]:
    """`sacctmgr -n -P show assoc` + ACCOUNT_FORMAT -> {account: what Slurm holds}."""
    rows: dict[str, dict] = {}
    users: dict[str, set[str]] = {}
    for line in text.splitlines():
        account, user, parent, shares, grp_tres, grp_tres_mins, grp_submit = (line.split("|") + [""] * 7)[:7]
        if not account:
            continue
        if user:
            users.setdefault(account, set()).add(user)
            continue
        rows[account] = {
            "parent": parent,
            "shares": int(shares) if shares.isdigit() else None,
            "gpus_at_once": parse_tres(grp_tres),
            "gpu_minutes": parse_tres(grp_tres_mins),
            "submit_jobs": int(grp_submit) if grp_submit.isdigit() else None,
        }
    return {name: AccountShown(name=name, users=frozenset(users.get(name, ())), **row) for name, row in rows.items()}


@dataclass(frozen=True)
class ShareRow:
    account: str
    user: str  # "" for the account's own row
    raw_shares: int | None
    norm_shares: Decimal | None
    raw_usage: int | None
    effective_usage: Decimal | None
    fairshare: Decimal | None  # the fair-share factor, 0..1; None on an account's row


def _decimal(text: str) -> Decimal | None:
    try:
        return Decimal(text) if text.strip() else None
    except InvalidOperation:
        return None


def _integer(text: str) -> int | None:
    return int(text) if text.strip().isdigit() else None


def parse_shares(text: str) -> list[ShareRow]:
    """`sshare -n -P -a -o SHARE_FORMAT` -> rows. User rows' account is indented by sshare."""
    found = []
    for line in text.splitlines():
        parts = (line.split("|") + [""] * 7)[:7]
        if not parts[0].strip():
            continue
        account, user, raw_shares, norm_shares, raw_usage, effective_usage, fairshare = parts
        found.append(
            ShareRow(
                account=account.strip(),
                user=user.strip(),
                raw_shares=_integer(raw_shares),
                norm_shares=_decimal(norm_shares),
                raw_usage=_integer(raw_usage),
                effective_usage=_decimal(effective_usage),
                fairshare=_decimal(fairshare),
            )
        )
    return found


@dataclass
class SlurmAccounts:
    """The account operations, through the Slurm CLI (slurmrestd's account endpoints need
    an operator token the portal does not hold)."""

    cli: SlurmCli

    def show(self, names: Iterable[str]) -> dict[str, AccountShown]:
        names = [check_account_name(name) for name in names]
        if not names:
            return {}
        shown = self.cli.run("sacctmgr", "-n", "-P", "show", "assoc", f"accounts={','.join(names)}", ACCOUNT_FORMAT)
        return parse_accounts(shown.stdout)

    def ensure_parent(self, name: str, *, organization: str) -> None:
        """An organisation's account directly under root; made once, never changed here."""
        check_account_name(name)
        if name not in self.show([name]):
            self._checked(
                self.cli.run(
                    "sacctmgr", "-i", "add", "account", name, "Parent=root", f"Description={name}",
                    f"Organization={check_account_name(organization)}", check=False,
                )
            )  # fmt: skip

    def ensure(self, spec: AccountSpec, *, organization: str) -> list[str]:
        """Make the account as `spec` says (create it, or change what differs); the changes
        made, as words for the log and the row ([] when it already was so)."""
        check_account_name(spec.name)
        check_account_name(spec.parent)
        shown = self.show([spec.name]).get(spec.name)
        if shown is None:
            self._checked(
                self.cli.run(
                    "sacctmgr", "-i", "add", "account", spec.name, f"Parent={spec.parent}",
                    f"Description={spec.name}", f"Organization={check_account_name(organization)}", check=False,
                )
            )  # fmt: skip
            self._checked(self._modify(spec, None))
            return [f"account {spec.name} created under {spec.parent}"]
        changes = spec.differences(shown)
        if shown.parent != spec.parent:
            self._checked(
                self.cli.run(
                    "sacctmgr", "-i", "modify", "account", "where", f"name={spec.name}", "set",
                    f"Parent={spec.parent}", check=False,
                )
            )  # fmt: skip
        if changes:
            self._checked(self._modify(spec, shown))
        return changes

    def _modify(self, spec: AccountSpec, shown: AccountShown | None) -> CommandResult:
        return self.cli.run(
            "sacctmgr", "-i", "modify", "account", "where", f"name={spec.name}", "set",
            *spec.set_arguments(shown), check=False,
        )  # fmt: skip

    def add_member(
        self, account: str, user: str, qos: list[str], default_qos: str, *, held: bool = False,
        gpu_minutes: int | None = None,
    ) -> None:  # fmt: skip
        """The user's association in the account, with `qos`; `held`: no new job may be
        submitted through it (MaxSubmitJobs=0, e.g. a paused plan), jobs already in run on;
        `gpu_minutes`: the GPU-minutes its jobs may use until the usage is reset (GrpTRESMins
        gres/gpu, a capped plan's budget where the user, not the account, pays), None: none."""
        result = self.cli.add_association(user, check_account_name(account), qos, default_qos)
        # An association that exists already: sacctmgr says "Nothing added" (24.11, 26.05).
        if result.returncode != 0 and "Nothing added" not in (result.stdout + result.stderr):
            self._checked(result)
        # An association that already existed keeps its old settings: set them as they should be.
        self._checked(
            self.cli.run(
                "sacctmgr", "-i", "modify", "user", "where", f"name={user}", f"account={account}", "set",
                f"QOS={','.join(sorted(qos))}", f"DefaultQOS={default_qos}",
                f"MaxSubmitJobs={0 if held else CLEAR}",
                f"GrpTRESMins=gres/gpu={CLEAR if gpu_minutes is None else gpu_minutes}", check=False,
            )
        )  # fmt: skip

    def remove_member(self, account: str, user: str) -> None:
        """Take the user out of the account. Slurm refuses to delete an association while the
        user has unfinished jobs in it, so first no new job may be submitted through it and its
        jobs are cancelled, running ones too (the account pays for them: its holder decided the
        user is out); the caller tries the delete again once they have left (SlurmCommandError
        until then)."""
        check_account_name(account)
        hold = self.cli.run(
            "sacctmgr", "-i", "modify", "user", "where", f"name={user}", f"account={account}", "set",
            "MaxSubmitJobs=0", check=False,
        )  # fmt: skip
        if hold.returncode == 0:
            self.cli.run("scancel", f"--user={user}", f"--account={account}", check=False)
        result = self.cli.delete_association(user, account)
        output = result.stdout + result.stderr
        if result.returncode != 0 and "Nothing deleted" not in output and "does not exist" not in output:
            self._checked(result)

    def delete(self, name: str) -> None:
        result = self.cli.run("sacctmgr", "-i", "delete", "account", check_account_name(name), check=False)
        output = result.stdout + result.stderr
        if result.returncode != 0 and "Nothing deleted" not in output:
            self._checked(result)

    def allocated_minutes(self, account: str, start: datetime, end: datetime) -> dict[str, Decimal]:
        """Typed GPU and shard minutes the account's jobs held within [start, end) (UTC)."""
        total: dict[str, Decimal] = {}
        for (_user, tres), minutes in self.allocated_minutes_by_user(account, start, end).items():
            total[tres] = total.get(tres, Decimal(0)) + minutes
        return total

    def allocated_minutes_by_user(self, account: str, start: datetime, end: datetime) -> dict[tuple[str, str], Decimal]:
        """{(user, TRES): minutes} held by the account's jobs within [start, end) (UTC)."""
        return self._held("User", [account], start, end)

    def allocated_minutes_by_account(
        self, accounts: Iterable[str], start: datetime, end: datetime
    ) -> dict[tuple[str, str], Decimal]:
        """{(account, TRES): minutes} held by the accounts' jobs within [start, end), one sacct run."""
        return self._held("Account", accounts, start, end)

    def _held(self, who: str, accounts: Iterable[str], start: datetime, end: datetime):
        names = [check_account_name(name) for name in accounts]
        if not names:
            return {}
        shown = self.cli.run(
            "env", "TZ=UTC0", "SLURM_TIME_FORMAT=standard", "sacct", "-n", "-P", "-X", "--allusers",
            f"--accounts={','.join(names)}", f"--starttime={start:%Y-%m-%dT%H:%M:%S}",
            f"--endtime={end:%Y-%m-%dT%H:%M:%S}", f"--format={who},Start,End,AllocTRES",
        )  # fmt: skip
        return parse_allocated_minutes(shown.stdout, start, end)

    def shares(self, accounts: Iterable[str]) -> list[ShareRow]:
        names = [check_account_name(name) for name in accounts]
        if not names:
            return []
        shown = self.cli.run("sshare", "-n", "-P", "-a", "-A", ",".join(names), "-o", SHARE_FORMAT)
        return parse_shares(shown.stdout)

    @staticmethod
    def _checked(result: CommandResult) -> None:
        if result.returncode != 0:
            output = (result.stderr or result.stdout).strip()
            raise SlurmCommandError(f"{' '.join(result.args[-6:])} failed ({result.returncode}): {output}")


def parse_allocated_minutes(text: str, start: datetime, end: datetime) -> dict[tuple[str, str], Decimal]:
    """`sacct -n -P -X --format=<Who>,Start,End,AllocTRES` (UTC, standard times; <Who> the user
    or the account) -> {(who, TRES): minutes} of the typed GPU and shard TRES the jobs held
    within [start, end)."""
    used: dict[tuple[str, str], Decimal] = {}
    for line in text.splitlines():
        user, began, ended, tres = (line.split("|") + ["", "", "", ""])[:4]
        began_at, ended_at = parse_slurm_time(began), parse_slurm_time(ended)
        if began_at is None:
            continue  # never started: held nothing
        ended_at = ended_at or end
        seconds = (min(ended_at, end) - max(began_at, start)).total_seconds()
        if seconds <= 0:
            continue
        for name, count in parse_tres(tres).items():
            if name.startswith(("gres/gpu:", "gres/shard:")):
                key = (user, name)
                used[key] = used.get(key, Decimal(0)) + Decimal(count) * Decimal(int(seconds)) / 60
    return used
