"""scontrol/sacctmgr for what slurmrestd cannot do: reservations, associations,
node drain/resume (and Unix users on the dev cluster).

Commands are argument lists run without a shell, behind a configurable prefix: on the
dev cluster `chroot <root>`, in production perhaps `ssh slurm-login`. Arguments are
checked against a conservative pattern first, because a prefix like `ssh` does hand
the remaining words to a remote shell.
"""

from __future__ import annotations

import logging
import re
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Literal

from cluster.commands.limits import (
    ASSOCIATION_FORMAT,
    CLEAR,
    QOS_FORMAT,
    AssociationLimits,
    QosLimits,
    parse_association_lines,
    parse_qos_lines,
)
from cluster.commands.reservation_request import (
    SCONTROL_TIME,
    GpuReservationRequest,
    checked_flags,
    checked_minutes,
    checked_name,
    checked_users,
    checked_word,
    scontrol_start,
)
from cluster.errors import SlurmCommandError, SlurmTransientError, words_for_slurm_output
from cluster.records.types import Reservation

log = logging.getLogger(__name__)

# Letters, digits and the punctuation Slurm's key=value syntax needs; no spaces, quotes,
# `;`, `$`, backticks, redirections or globs.
_SAFE_ARGUMENT = re.compile(r"[A-Za-z0-9_.,:=/@+%\-\[\]]*")
# What a Slurm reason (Reason=..., a drain's or a reboot's) may hold: `run` checks it, `slurm_reason` makes it.
_REASON_CHARACTERS = r"A-Za-z0-9_.,:/@+\- "


def slurm_reason(text: str) -> str:
    """`text` as a reason Slurm takes: any other character a space, at most 200."""
    return re.sub(f"[^{_REASON_CHARACTERS}]", " ", text).strip()[:200]


def _node_name(node: str) -> str:
    """One node by name, never a host list or an expression (a reboot's target)."""
    if not re.fullmatch(r"[A-Za-z0-9._-]{1,64}", node):
        raise ValueError(f"not a node name: {node!r}")
    return node


# Slurm's words for "the controller is not there right now".
_TRANSIENT_OUTPUT = (
    "Unable to contact slurm controller",
    "Socket timed out",
    "Connection refused",
    "Zero Bytes were transmitted",
)


@dataclass
class CommandResult:
    args: list[str]
    returncode: int
    stdout: str
    stderr: str


@dataclass
class SlurmCli:
    prefix: list[str]
    noop: bool = False
    timeout: float = 30.0
    executed: list[list[str]] = field(default_factory=list)

    def run(
        self, *args: str, check: bool = True, reason_argument: str | None = None, reason_before_last: bool = False
    ) -> CommandResult:
        """Run prefix + args. `reason_argument` may hold spaces (a drain reason) and is
        appended as `Reason=<text>` after its own stricter check (before the last argument where
        the command wants its node list last: `scontrol reboot`)."""
        argv = list(args)
        for argument in argv:
            # fullmatch: `$` in re.match would let a trailing newline through.
            if not _SAFE_ARGUMENT.fullmatch(argument):
                raise ValueError(f"refusing unsafe Slurm command argument {argument!r}")
        if reason_argument is not None:
            if not re.fullmatch(f"[{_REASON_CHARACTERS}]{{1,200}}", reason_argument):
                raise ValueError("a reason may hold letters, digits, spaces and .,:/@+-_ (at most 200)")
            argv.insert(len(argv) - 1 if reason_before_last else len(argv), f"Reason={reason_argument}")
        full = [*self.prefix, *argv]
        self.executed.append(full)
        if self.noop:
            log.info("noop: would run %s", full)
            return CommandResult(full, 0, "", "")
        try:
            # errors="replace": job names and reasons are users' bytes, not always UTF-8.
            completed = subprocess.run(
                full, capture_output=True, text=True, errors="replace", timeout=self.timeout, check=False
            )
        except subprocess.TimeoutExpired as exc:
            raise SlurmTransientError(f"{argv[0]} did not finish within {self.timeout}s") from exc
        except OSError as exc:
            raise SlurmCommandError(f"cannot run {full[0]}: {exc}") from exc
        result = CommandResult(full, completed.returncode, completed.stdout, completed.stderr)
        if check and completed.returncode != 0:
            output = (completed.stderr or completed.stdout).strip()
            error_class = SlurmTransientError if any(t in output for t in _TRANSIENT_OUTPUT) else SlurmCommandError
            raise error_class(
                f"{' '.join(argv)} failed ({completed.returncode}): {output}",
                public_message=words_for_slurm_output(output),
            )
        return result

    # --- the operations the portal needs -------------------------------------------------
    def _config_value(self, key: str, *scontrol: str) -> str:
        """One setting as `scontrol show config` prints it ("" when it prints none)."""
        for line in self.run(*scontrol, "show", "config").stdout.splitlines():
            name, _, value = line.partition("=")
            if name.strip() == key and value.strip():
                return value.strip()
        return ""

    def cluster_name(self) -> str:
        """Slurm's ClusterName, as `scontrol show config` says it."""
        if name := self._config_value("ClusterName", "scontrol"):
            return name
        raise SlurmCommandError("scontrol show config names no ClusterName")

    def slurmctld_boot_time(self) -> datetime:
        """When slurmctld last started (`scontrol show config`'s BOOT_TIME, read in UTC): a later one
        than the portal saw last means it was restarted (console/actions/canary.py)."""
        if (booted := _shown_time(self._config_value("BOOT_TIME", *_SCONTROL_UTC))) is not None:
            return booted
        raise SlurmCommandError("scontrol show config gives no BOOT_TIME")

    def dump_associations(self, cluster_name: str) -> str:
        """`sacctmgr dump`: the cluster's accounts, users, associations and their limits, in the file
        format `sacctmgr load` takes back (written to its standard output)."""
        dumped = self.run("sacctmgr", "-i", "dump", cluster_name, "file=/dev/stdout").stdout
        if "Cluster - " not in dumped:
            raise SlurmCommandError(f"sacctmgr dump {cluster_name} wrote no cluster line")
        return dumped

    def drain_node(self, node: str, reason: str) -> CommandResult:
        return self.run("scontrol", "update", f"NodeName={node}", "State=DRAIN", reason_argument=reason)

    def set_node_features(self, node: str, features: Sequence[str]) -> CommandResult:
        """A node's available and active features, all of them (not kept across a restart of
        slurmctld: whoever sets them keeps them in step)."""
        for feature in features:
            if not re.fullmatch(r"[A-Za-z0-9_:.-]{1,64}", feature):
                raise ValueError(f"not a node feature: {feature!r}")
        joined = ",".join(features)
        return self.run(
            "scontrol", "update", f"NodeName={node}", f"AvailableFeatures={joined}", f"ActiveFeatures={joined}"
        )

    def power_node(self, node: str, action: str, reason: str | None = None) -> CommandResult:
        """Slurm's power saving: POWER_UP, or POWER_DOWN_ASAP (drain, power down once its jobs
        end), POWER_DOWN (now, jobs requeued). Needs SuspendProgram/ResumeProgram configured."""
        if action not in ("POWER_UP", "POWER_DOWN", "POWER_DOWN_ASAP"):
            raise ValueError(f"not a power action: {action!r}")
        return self.run("scontrol", "update", f"NodeName={node}", f"State={action}", reason_argument=reason)

    def set_suspend_excluded_nodes(self, nodes: Sequence[str]) -> CommandResult:
        """Nodes power saving never suspends (admins' "keep on"); an empty list: none."""
        return self.run("scontrol", "update", f"SuspendExcNodes={','.join(nodes)}")

    def resume_node(self, node: str) -> CommandResult:
        return self.run("scontrol", "update", f"NodeName={node}", "State=RESUME")

    def reboot_node(self, node: str, reason: str) -> CommandResult:
        """Slurm drains the node, waits for its jobs to end, runs RebootProgram on it and resumes it
        once it has booted (ASAP nextstate=RESUME); ResumeTimeout later it marks a node that never
        came back DOWN. slurmrestd has no reboot (24.11 and 26.05)."""
        return self.run(
            "scontrol", "reboot", "ASAP", "nextstate=RESUME", _node_name(node), reason_argument=reason,
            reason_before_last=True,
        )  # fmt: skip

    def cancel_reboot(self, node: str) -> CommandResult:
        """Withdraw a reboot not yet issued: Slurm lifts the drain its ASAP request set."""
        return self.run("scontrol", "cancel_reboot", _node_name(node))

    def add_association(self, user: str, account: str, qos: list[str], default_qos: str) -> CommandResult:
        return self.run(
            "sacctmgr",
            "-i",
            "add",
            "user",
            user,
            f"Account={account}",
            f"QOS={','.join(qos)}",
            f"DefaultQOS={default_qos}",
            check=False,
        )

    # --- limits Slurm enforces (cluster/commands/limits.py) -------------------------------------------
    def set_association_limits(self, limits: AssociationLimits) -> CommandResult:
        """QOS, default QOS, GPU-minute budget and submit hold of one user's association.
        (MaxSubmitJobs=-1 also lifts the hold `hold_user_submissions` puts on an account.)"""
        return self.run(
            "sacctmgr", "-i", "modify", "user", "where", f"name={limits.user}", f"account={limits.account}", "set",
            *limits.set_arguments(), check=False,
        )  # fmt: skip

    def show_association_limits(self, user: str) -> dict[tuple[str, str], AssociationLimits]:
        shown = self.run("sacctmgr", "-n", "-P", "show", "assoc", f"users={user}", ASSOCIATION_FORMAT)
        return parse_association_lines(shown.stdout)

    def show_all_association_limits(self, account: str) -> dict[tuple[str, str], AssociationLimits]:
        shown = self.run("sacctmgr", "-n", "-P", "show", "assoc", f"accounts={account}", ASSOCIATION_FORMAT)
        return parse_association_lines(shown.stdout)

    def hold_user_starts(self, user: str, account: str, held: bool) -> CommandResult:
        """No job of the user's association may start (MaxJobs=0: pending ones wait, with reason
        AssocMaxJobsLimit, running ones go on), or that hold lifted (MaxJobs=-1). Not part of the
        plan's limits (AssociationLimits leaves MaxJobs alone), so a plan sync never lifts it."""
        return self.run(
            "sacctmgr", "-i", "modify", "user", "where", f"name={user}", f"account={account}", "set",
            f"MaxJobs={0 if held else CLEAR}", check=False,
        )  # fmt: skip

    def reset_user_usage(self, user: str, account: str) -> CommandResult:
        """Zero the association's recorded usage (the monthly GPU-minute budget starts again).
        Alone in its command: together with a limit change sacctmgr reset the usage but
        silently dropped the limit (seen on 26.05)."""
        return self.run("sacctmgr", "-i", "modify", "user", "where", f"name={user}", f"account={account}", "set",
                        "RawUsage=0")  # fmt: skip

    def ensure_qos(self, limits: QosLimits, *, exists: bool | None = None) -> CommandResult:
        """Create the QOS when missing, then set its limits (`add` fails for an existing QOS).
        `exists` saves the read when the caller knows (and lets a noop run say the truth)."""
        if exists is None:
            exists = limits.name in self.show_qos([limits.name])
        if not exists:
            self.run("sacctmgr", "-i", "add", "qos", limits.name)
        return self.run("sacctmgr", "-i", "modify", "qos", "where", f"name={limits.name}", "set",
                        *limits.set_arguments())  # fmt: skip

    def show_qos(self, names: list[str] | None = None) -> dict[str, QosLimits]:
        where = ["where", f"name={','.join(names)}"] if names else []
        if self.noop:
            return {}
        return parse_qos_lines(self.run("sacctmgr", "-n", "-P", "show", "qos", *where, QOS_FORMAT).stdout)

    def hold_user_submissions(self, user: str) -> CommandResult:
        """Slurm refuses every new job of the user from now on, from any submit host."""
        return self.run(
            "sacctmgr", "-i", "modify", "user", "where", f"name={user}", "set", "MaxSubmitJobs=0", check=False
        )

    def cancel_user_jobs(self, user: str) -> CommandResult:
        return self.run("scancel", f"--user={user}", check=False)

    def delete_association(self, user: str, account: str) -> CommandResult:
        return self.run("sacctmgr", "-i", "delete", "user", "where", f"name={user}", f"account={account}", check=False)

    def show_association(self, user: str) -> CommandResult:
        return self.run("sacctmgr", "-n", "-P", "show", "assoc", f"users={user}", "format=user,account,qos,defaultqos")

    def set_array_throttle(self, array_job_id: int, throttle: int) -> CommandResult:
        """How many of the array's tasks may run at once (0: no limit). slurmrestd cannot change
        it: the job update ignores `array` ("unknown field", 24.11 and 26.05)."""
        if isinstance(throttle, bool) or not isinstance(throttle, int) or not 0 <= throttle <= 1_000_000:
            raise ValueError(f"not a throttle: {throttle!r}")
        return self.run("scontrol", "update", f"JobId={int(array_job_id)}", f"ArrayTaskThrottle={throttle}")

    def requeue_job(self, job_id: int) -> CommandResult:
        """Put a running job back in the queue: its run so far stays in slurmdbd as a record
        of its own (billing meters each run). Slurm then holds it back for a while
        (BeginTime, ~2 min on 24.11) before it runs again."""
        return self.run("scontrol", "requeue", str(int(job_id)))

    # --- reservations ----------------------------------------------------------------------
    # slurmrestd 24.11 only reads reservations; these create, change and delete them with
    # scontrol. Every argument is checked first (cluster/commands/reservation_request.py); `run`'s
    # whole-match check still stands behind them. They run as `env TZ=UTC0 SLURM_TIME_FORMAT=standard scontrol ...`:
    # scontrol reads and prints times in its own process's zone (seen on 24.11: the same
    # reservation shows 10:00 under TZ=UTC0 and 13:00 under TZ=XYZ-3), so the portal formats
    # and parses them in UTC whatever the login node's zone. Behaviour seen on the 24.11 dev
    # cluster (5 nodes of 16 cores):
    # - `TRES=gres/gpu:a100=2` picks a node by itself (gpu-a100-01, then gpu-a100-02 once two
    #   reservations hold its 4 GPUs) and takes every free core of it: shown as
    #   `Nodes=gpu-a100-01 CoreCnt=16 ... TRES=cpu=16,gres/gpu:a100=2,gres/gpu=2`. Asking for
    #   fewer cores (`TRES=cpu=2,gres/gpu:a100=2` or `CoreCnt=2`) still takes all 16.
    #   "Free" is judged when the reservation is made, even for a window months ahead: with a
    #   3-core job running on the node it took `CoreIDs=3-15` (13). Two GPU reservations may
    #   share a node's cores (both showed CoreIDs=0-15) as long as GPUs are left.
    #   `TRES=gres/gpu:a100=6` spans gpu-a100-[01-02] (32 cores).
    # - When no node has the GPUs left in that window: "Error creating the reservation:
    #   Requested nodes are busy"; a taken name: "Duplicate reservation name"; a user without
    #   an association: "Invalid account or account/partition combination specified".
    # - `Flags=ANY_NODES` with a GPU TRES drops the GPUs (`TRES=(null)`, no node): refused here.
    # - The node form (`Nodes=gpu-h100-01 Flags=MAINT,IGNORE_JOBS`) shows
    #   `Flags=MAINT,IGNORE_JOBS,SPEC_NODES TRES=cpu=16`; MAINT reservations may overlap others.
    # - `update ... StartTime=` moves the window and keeps its duration; `Duration=` moves the end.
    # - A missing reservation: show says "Reservation <name> not found", update and delete
    #   "Requested reservation is invalid" (all exit 1).
    def create_gpu_reservation(self, request: GpuReservationRequest) -> CommandResult:
        """Reserve GPUs as `request` says; Slurm chooses the node(s) and holds all their free cores.

        Runs `scontrol create reservation ReservationName=<name> StartTime=<UTC ISO> Duration=<min>
        Users=<u1,u2> TRES=gres/gpu:<type>=<count> [Flags=<F1,F2>]`."""
        arguments = [
            f"ReservationName={request.name}",
            f"StartTime={scontrol_start(request.start)}",
            f"Duration={request.duration_minutes}",
            f"Users={','.join(request.users)}",
            f"TRES=gres/gpu:{request.gpu_type}={request.count}",
        ]
        arguments += [f"Flags={','.join(request.flags)}"] if request.flags else []
        return self.run(*_SCONTROL_UTC, "create", "reservation", *arguments)

    def create_node_reservation(
        self,
        name: str,
        *,
        nodes: Sequence[str],
        users: Sequence[str],
        start: datetime | Literal["now"],
        duration_minutes: int,
        flags: Sequence[str] = ("MAINT", "IGNORE_JOBS"),
    ) -> CommandResult:
        """Reserve whole nodes for `users` (a maintenance hold by default: MAINT lets it overlap
        other reservations, IGNORE_JOBS lets it start while jobs still run there).

        Runs `scontrol create reservation ReservationName=<name> StartTime=<UTC ISO or now>
        Duration=<min> Users=<u1,...> Nodes=<n1,...> Flags=<F1,...>`."""
        if isinstance(nodes, str) or not nodes:
            raise ValueError("nodes must be a non-empty list of node names")
        arguments = [
            f"ReservationName={checked_name(name)}",
            f"StartTime={scontrol_start(start)}",
            f"Duration={checked_minutes(duration_minutes)}",
            f"Users={','.join(checked_users(users))}",
            f"Nodes={','.join(checked_word(node, 'node name') for node in nodes)}",
        ]
        arguments += [f"Flags={','.join(checked_flags(flags))}"] if flags else []
        return self.run(*_SCONTROL_UTC, "create", "reservation", *arguments)

    def update_reservation(
        self,
        name: str,
        *,
        start: datetime | None = None,
        duration_minutes: int | None = None,
        users: Sequence[str] | None = None,
    ) -> CommandResult:
        """Change the start (the duration stays), the duration (the end moves) or the users
        (the list is replaced) of an existing reservation."""
        arguments = []
        if start is not None:
            arguments.append(f"StartTime={scontrol_start(start, allow_now=False)}")
        if duration_minutes is not None:
            arguments.append(f"Duration={checked_minutes(duration_minutes)}")
        if users is not None:
            arguments.append(f"Users={','.join(checked_users(users))}")
        if not arguments:
            raise ValueError("update_reservation needs something to change")
        return self.run(*_SCONTROL_UTC, "update", f"ReservationName={checked_name(name)}", *arguments)

    def delete_reservation(self, name: str, *, check: bool = True) -> CommandResult:
        """`check=False` for clean-ups that may find it gone already."""
        return self.run(*_SCONTROL_UTC, "delete", f"ReservationName={checked_name(name)}", check=check)

    def show_reservation(self, name: str) -> Reservation | None:
        """The reservation as slurmctld holds it now, None when there is none of that name
        (and in noop mode, where nothing is asked). Times are UTC."""
        result = self.run(*_SCONTROL_UTC, "show", "-o", "reservation", checked_name(name), check=False)
        if self.noop:
            return None
        output = (result.stdout + result.stderr).strip()
        if result.returncode != 0:
            if f"Reservation {name} not found" in output:
                return None
            error_class = SlurmTransientError if any(t in output for t in _TRANSIENT_OUTPUT) else SlurmCommandError
            raise error_class(
                f"scontrol show reservation {name} failed ({result.returncode}): {output}",
                public_message=words_for_slurm_output(output),
            )
        for line in result.stdout.splitlines():
            shown = parse_reservation_line(line)
            if shown is not None and shown.name == name:
                return shown
        return None


# --- reservation arguments (checked before any command is built) -----------------------------
_SCONTROL_UTC = ("env", "TZ=UTC0", "SLURM_TIME_FORMAT=standard", "scontrol")


def _shown_time(value: str) -> datetime | None:
    try:
        return datetime.strptime(value, SCONTROL_TIME).replace(tzinfo=UTC)
    except ValueError:
        return None  # "Unknown", "None", "(null)"


def _shown_list(value: str) -> tuple[str, ...]:
    return () if value in ("", "(null)") else tuple(item for item in value.split(",") if item)


def parse_reservation_line(line: str) -> Reservation | None:
    """One line of `scontrol show -o reservation` (under TZ=UTC0) as a `Reservation`, e.g.
    `ReservationName=r StartTime=2026-12-30T10:00:00 EndTime=2026-12-30T11:00:00 ...
    Nodes=gpu-a100-01 ... Flags=   NodeName=gpu-a100-01 CoreIDs=0-15 TRES=cpu=16,gres/gpu:a100=2,
    gres/gpu=2 Users=alice ...`. The first of a repeated key wins (NodeName/CoreIDs repeat
    per node); a word without `Key=` belongs to the value before it."""
    fields: dict[str, str] = {}
    key = None
    for word in line.split():
        match = re.match(r"([A-Za-z]+)=(.*)", word)
        if match:
            key = match.group(1)
            if key not in fields:
                fields[key] = match.group(2)
            else:
                key = None  # a repeat: ignore it and the words that follow it
        elif key is not None:
            fields[key] += " " + word
    if "ReservationName" not in fields:
        return None
    return Reservation(
        name=fields["ReservationName"],
        users=_shown_list(fields.get("Users", "")),
        nodes="" if fields.get("Nodes", "") == "(null)" else fields.get("Nodes", ""),
        start_time=_shown_time(fields.get("StartTime", "")),
        end_time=_shown_time(fields.get("EndTime", "")),
        tres="" if fields.get("TRES", "") == "(null)" else fields.get("TRES", ""),
        # "PURGE_COMP=00:05:00" is shown with its time; the flag is the name.
        flags=tuple(flag.split("=", 1)[0] for flag in _shown_list(fields.get("Flags", ""))),
    )
