"""Limits Slurm enforces itself, as values: a QOS's (priority, wall time, GPUs per user) and
a user association's (QOS, GPU-minute budget, submit hold). Pure: the formats sacctmgr takes
and prints, parsed and written here; cluster/commands/cli.py runs the commands.

Why these (deploy/devcluster/README.md and shared notes on limits):
- `MaxTRESPerUser` with typed GPUs (`gres/gpu:a100=2`) and `Flags=DenyOnLimit` refuses a job
  over the limit at submit instead of leaving it pending forever; typed limits apply only to
  typed requests, so the cluster's job_submit.lua refuses untyped GPU requests.
- A GPU-minute budget (`GrpTRESMins=gres/gpu=N`) belongs on the user's association: on a QOS
  it would be shared by every user of the QOS and would hide the association's own limit.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from cluster.records.gres import parse_tres

# sacctmgr prints "unset" as an empty field and takes -1 to clear a limit.
CLEAR = -1


def format_tres(tres: dict[str, int]) -> str:
    """{"gres/gpu:a100": 2} -> "gres/gpu:a100=2", sorted so equal maps print alike."""
    return ",".join(f"{name}={int(count)}" for name, count in sorted(tres.items()))


_WALL = re.compile(r"(?:(?P<days>\d+)-)?(?:(?P<hours>\d+):)?(?P<minutes>\d+):(?P<seconds>\d+)")


def _time_parts(text: str) -> dict[str, int] | None:
    """sacctmgr's "7-00:00:00", "04:00:00" or "30:00" -> its days, hours, minutes and seconds;
    "" (unset) -> None."""
    text = text.strip()
    if not text:
        return None
    match = _WALL.fullmatch(text)
    if match is None:
        raise ValueError(f"not a Slurm time: {text!r}")
    return {key: int(value or 0) for key, value in match.groupdict().items()}


def parse_wall_minutes(text: str) -> int | None:
    """A wall time in minutes, a started minute counted whole; "" (unlimited) -> None."""
    parts = _time_parts(text)
    if parts is None:
        return None
    return parts["days"] * 1440 + parts["hours"] * 60 + parts["minutes"] + (1 if parts["seconds"] else 0)


def format_seconds(seconds: int) -> str:
    """120 -> "00:02:00", sacctmgr's form of GraceTime and PreemptExemptTime."""
    return f"{seconds // 3600:02d}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"


def parse_seconds(text: str) -> int | None:
    """sacctmgr's "00:02:00" or "1-00:00:00" -> seconds; "" (unset) -> None."""
    parts = _time_parts(text)
    if parts is None:
        return None
    return ((parts["days"] * 24 + parts["hours"]) * 60 + parts["minutes"]) * 60 + parts["seconds"]


@dataclass(frozen=True)
class QosLimits:
    name: str
    priority: int
    max_wall_minutes: int | None
    max_tres_per_user: dict[str, int] = field(default_factory=dict)
    deny_on_limit: bool = True
    # Preemption (slurm.conf PreemptType=preempt/qos): the QOS whose running jobs this QOS's
    # jobs may preempt; how this QOS's own jobs are preempted ("cluster": slurm.conf's
    # PreemptMode; "requeue"); the notice a preempted job gets (SIGTERM, then this many seconds
    # before SIGKILL); and how long a job runs before it may be preempted at all (None: unset).
    preempt: tuple[str, ...] = ()
    preempt_mode: str = "cluster"
    grace_seconds: int = 0
    preempt_exempt_seconds: int | None = None

    def set_arguments(self) -> list[str]:
        arguments = [f"Priority={self.priority}", f"MaxWall={self.max_wall_minutes or CLEAR}"]
        if self.max_tres_per_user:
            arguments.append(f"MaxTRESPerUser={format_tres(self.max_tres_per_user)}")
        arguments.append("Flags=DenyOnLimit" if self.deny_on_limit else f"Flags={CLEAR}")
        arguments.append(f"Preempt={','.join(self.preempt)}")  # empty clears the list
        arguments.append(f"PreemptMode={self.preempt_mode}")
        arguments.append(f"GraceTime={self.grace_seconds}")
        exempt = self.preempt_exempt_seconds
        arguments.append(f"PreemptExemptTime={format_seconds(exempt) if exempt is not None else CLEAR}")
        return arguments

    def differences(self, shown: QosLimits | None) -> list[str]:
        """What differs in slurmdbd, in words; [] when Slurm enforces exactly this."""
        if shown is None:
            return [f"QOS {self.name} does not exist"]
        found = []
        for label, want, have in (
            ("priority", self.priority, shown.priority),
            ("MaxWall (min)", self.max_wall_minutes, shown.max_wall_minutes),
            ("DenyOnLimit", self.deny_on_limit, shown.deny_on_limit),
            ("Preempt", tuple(sorted(self.preempt)), tuple(sorted(shown.preempt))),
            ("PreemptMode", self.preempt_mode, shown.preempt_mode),
            ("GraceTime (s)", self.grace_seconds, shown.grace_seconds),
            ("PreemptExemptTime (s)", self.preempt_exempt_seconds, shown.preempt_exempt_seconds),
        ):
            if want != have:
                found.append(f"QOS {self.name}: {label} is {have}, the plan says {want}")
        for name, count in sorted(self.max_tres_per_user.items()):
            have = shown.max_tres_per_user.get(name)
            if have != count:
                found.append(f"QOS {self.name}: MaxTRESPerUser {name} is {have}, the plan says {count}")
        return found


QOS_FORMAT = "format=Name,Priority,MaxWall,MaxTRESPU,Flags,Preempt,PreemptMode,GraceTime,PreemptExemptTime"


def parse_qos_lines(text: str) -> dict[str, QosLimits]:
    """`sacctmgr -n -P show qos` + QOS_FORMAT -> {name: limits}."""
    found = {}
    for line in text.splitlines():
        if not line.strip():
            continue
        name, priority, wall, tres, flags, preempt, mode, grace, exempt = (line.split("|") + [""] * 9)[:9]
        found[name] = QosLimits(
            name=name,
            priority=int(priority or 0),
            max_wall_minutes=parse_wall_minutes(wall),
            max_tres_per_user=parse_tres(tres),
            deny_on_limit="DenyOnLimit" in flags.split(","),
            preempt=tuple(sorted(part for part in preempt.split(",") if part)),
            preempt_mode=mode or "cluster",
            grace_seconds=parse_seconds(grace) or 0,
            preempt_exempt_seconds=parse_seconds(exempt),
        )
    return found


@dataclass(frozen=True)
class AssociationLimits:
    user: str
    account: str
    qos: tuple[str, ...]
    default_qos: str
    # GPU-minutes the user may use until the usage is reset (monthly); None: no budget.
    gpu_minutes: int | None = None
    # 0 holds every new job (a paused plan); None: no hold.
    max_submit_jobs: int | None = None

    def set_arguments(self) -> list[str]:
        return [
            f"QOS={','.join(sorted(self.qos))}",
            f"DefaultQOS={self.default_qos}",
            f"GrpTRESMins=gres/gpu={CLEAR if self.gpu_minutes is None else self.gpu_minutes}",
            f"MaxSubmitJobs={CLEAR if self.max_submit_jobs is None else self.max_submit_jobs}",
        ]

    def differences(self, shown: AssociationLimits | None) -> list[str]:
        if shown is None:
            return [f"association {self.user}@{self.account} does not exist"]
        found = []
        for label, want, have in (
            ("QOS", sorted(self.qos), sorted(shown.qos)),
            ("DefaultQOS", self.default_qos, shown.default_qos),
            ("GrpTRESMins gres/gpu", self.gpu_minutes, shown.gpu_minutes),
            ("MaxSubmitJobs", self.max_submit_jobs, shown.max_submit_jobs),
        ):
            if want != have:
                found.append(f"{self.user}: {label} is {have}, the plan says {want}")
        return found


ASSOCIATION_FORMAT = "format=User,Account,QOS,DefaultQOS,GrpTRESMins,MaxSubmit"


def parse_association_lines(text: str) -> dict[tuple[str, str], AssociationLimits]:
    """`sacctmgr -n -P show assoc` + ASSOCIATION_FORMAT -> {(user, account): limits}; account
    rows (no user) are left out."""
    found = {}
    for line in text.splitlines():
        user, account, qos, default_qos, grp_tres_mins, max_submit = (line.split("|") + [""] * 6)[:6]
        if not user:
            continue
        found[(user, account)] = AssociationLimits(
            user=user,
            account=account,
            qos=tuple(sorted(filter(None, qos.split(",")))),
            default_qos=default_qos,
            gpu_minutes=parse_tres(grp_tres_mins).get("gres/gpu"),
            max_submit_jobs=int(max_submit) if max_submit else None,
        )
    return found
