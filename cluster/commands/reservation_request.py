"""A reservation as the portal asks Slurm for it, checked once: the same value goes to
scontrol (cluster/commands/cli.py) and to slurmrestd (cluster/slurmrest/), through the reservation
gateway (cluster/clusters/reservation_gateway.py), so every path accepts the same input and refuses the
same input with the same words. The rules are scontrol's, found on 24.11: names and words of
letters, digits, _ and -; cluster user names; a start with a time zone (or NOW); whole minutes.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Literal

NOW: Literal["now"] = "now"
# Flags scontrol 24.11 accepted on a node reservation (tried one by one); PART_NODES, REPLACE,
# REPLACE_DOWN need other options, and SPEC_NODES is Slurm's own marker, not an input.
RESERVATION_FLAGS = frozenset(
    {
        "ANY_NODES", "DAILY", "FLEX", "HOURLY", "IGNORE_JOBS", "LICENSE_ONLY", "MAGNETIC", "MAINT",
        "NO_HOLD_JOBS_AFTER", "OVERLAP", "PURGE_COMP", "STATIC_ALLOC", "TIME_FLOAT", "USER_DELETE",
        "WEEKDAY", "WEEKEND", "WEEKLY",
    }
)  # fmt: skip
# With a GPU TRES these reserve no GPU at all (ANY_NODES seen giving TRES=(null)).
FLAGS_WITHOUT_GPUS = frozenset({"ANY_NODES", "LICENSE_ONLY"})
SCONTROL_TIME = "%Y-%m-%dT%H:%M:%S"
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,63}")
_CLUSTER_USER = re.compile(r"[a-z_][a-z0-9_-]{0,31}")
MAX_RESERVATION_MINUTES = 366 * 24 * 60
MAX_RESERVATION_GPUS = 4096


def checked_name(name: str) -> str:
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise ValueError(f"{name!r} is not a reservation name (letters, digits, _ and -, at most 64)")
    return name


def checked_word(value: str, what: str) -> str:
    if not isinstance(value, str) or not _NAME.fullmatch(value):
        raise ValueError(f"{value!r} is not a {what} (letters, digits, _ and -)")
    return value


def checked_count(count: int) -> int:
    if isinstance(count, bool) or not isinstance(count, int) or not 1 <= count <= MAX_RESERVATION_GPUS:
        raise ValueError(f"a GPU count must be a whole number from 1 to {MAX_RESERVATION_GPUS}, not {count!r}")
    return count


def checked_minutes(minutes: int) -> int:
    if isinstance(minutes, bool) or not isinstance(minutes, int) or not 1 <= minutes <= MAX_RESERVATION_MINUTES:
        raise ValueError(f"a duration is whole minutes from 1 to {MAX_RESERVATION_MINUTES}, not {minutes!r}")
    return minutes


def checked_users(users: Sequence[str]) -> tuple[str, ...]:
    """The users, each once, in order."""
    # A bare string is a sequence too: "alice" must not become Users=a,l,i,c,e.
    if isinstance(users, str) or not users:
        raise ValueError("users must be a non-empty list of cluster user names")
    for user in users:
        if not isinstance(user, str) or not _CLUSTER_USER.fullmatch(user):
            raise ValueError(f"{user!r} is not a valid cluster user name")
    return tuple(dict.fromkeys(users))


def scontrol_start(start: datetime | Literal["now"], *, allow_now: bool = True) -> str:
    """A start as scontrol takes it (UTC, its own format), or NOW."""
    if allow_now and start == NOW:
        return NOW
    if not isinstance(start, datetime) or start.tzinfo is None or start.utcoffset() is None:
        raise ValueError(f"a start time must be a datetime with a time zone{' or NOW' if allow_now else ''}")
    return start.astimezone(UTC).strftime(SCONTROL_TIME)


def checked_flags(flags: Sequence[str], *, refused: frozenset[str] = frozenset()) -> tuple[str, ...]:
    """The flags, each once, in order."""
    if isinstance(flags, str):
        raise ValueError("flags must be a list of flag names")
    for flag in flags:
        if flag not in RESERVATION_FLAGS or flag in refused:
            raise ValueError(f"{flag!r} is not a reservation flag the portal uses here")
    return tuple(dict.fromkeys(flags))


@dataclass(frozen=True)
class GpuReservationRequest:
    """`count` GPUs of `gpu_type` for `users`, from `start` (an aware datetime, or NOW) for
    `duration_minutes`; Slurm chooses the node(s). Made only valid: ValueError otherwise."""

    name: str
    gpu_type: str
    count: int
    users: tuple[str, ...]
    start: datetime | Literal["now"]
    duration_minutes: int
    flags: tuple[str, ...] = ()

    def __post_init__(self):
        checked_name(self.name)
        checked_word(self.gpu_type, "GPU type")
        checked_count(self.count)
        object.__setattr__(self, "users", checked_users(self.users))
        checked_minutes(self.duration_minutes)
        object.__setattr__(self, "flags", checked_flags(self.flags, refused=FLAGS_WITHOUT_GPUS))
        scontrol_start(self.start)

    def starting_by(self, now: datetime) -> GpuReservationRequest:
        """The same request with NOW as the moment `now` (slurmrestd takes no NOW)."""
        return replace(self, start=now) if self.start == NOW else self
