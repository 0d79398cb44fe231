"""Slurm host lists ("gpu-a100-[01-02,04],gpu-h100-01", "rack[1-2]-node[1-2]") -> node names,
in Slurm's order, through python-hostlist (a maintained parser of Slurm's full syntax:
several bracket groups in one name, zero padding, ranges and lists). A list Slurm would not
write (unbalanced brackets, a reversed or empty range) raises HostlistError rather than
quietly meaning no nodes: metering and capacity read nodes from here, and "no nodes" there is
"nothing used". cluster/tests/test_hostlist.py checks it against `scontrol show hostnames`."""

from __future__ import annotations

import hostlist


class HostlistError(ValueError):
    """Text that is not a Slurm host list."""


def expand_hostlist(text: str) -> list[str]:
    text = (text or "").strip()
    if not text:
        return []
    try:
        return hostlist.expand_hostlist(text)
    except hostlist.BadHostlist as exc:
        raise HostlistError(f"not a Slurm host list: {text!r} ({exc})") from exc
