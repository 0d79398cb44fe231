"""`{{ node|node_state }}`: a Slurm node's state in words a user knows ("MIXED+DRAIN" -> "partly
in use, draining"; "IDLE+RESERVED,PLANNED" -> "idle, reserved, kept for a waiting job"), with
Slurm's own term in the `title` for those who know it. Takes a node (its `state` and the comma
list `state_flags`, as `cluster.models.Node` keeps them) or Slurm's text "STATE+FLAG,FLAG".
`{% load node_states %}`; `state_words()` is the same words for what is not a template (the
heatmap's data)."""

from __future__ import annotations

from django import template
from django.utils.html import format_html

register = template.Library()

# Slurm's base states (slurm.h's node_states; slurmrestd's first entry of `state`).
BASE_WORDS = {
    "IDLE": "idle",
    "MIXED": "partly in use",
    "ALLOCATED": "in use",
    "DOWN": "down",
    "ERROR": "in error",
    "FUTURE": "not in service yet",
    "UNKNOWN": "state unknown",
}
# Slurm's state flags (slurm.h's NODE_STATE_*), in the order Slurm lists them.
FLAG_WORDS = {
    "RESERVED": "reserved",
    "PLANNED": "kept for a waiting job",
    "COMPLETING": "finishing jobs",
    "MAINTENANCE": "in maintenance",
    "NOT_RESPONDING": "not responding",
    "POWERED_DOWN": "powered down",
    "POWERING_UP": "powering up",
    "POWERING_DOWN": "powering down",
    "POWER_DOWN": "to be powered down",
    "POWER_DRAIN": "to be powered down",
    "REBOOT_REQUESTED": "to be rebooted",
    "REBOOT_ISSUED": "rebooting",
    "REBOOT_CANCELED": "reboot cancelled",
    "INVALID_REG": "misconfigured",
    "INVALID": "misconfigured",
    "CLOUD": "cloud node",
    "DYNAMIC_NORM": "dynamic",
    "DYNAMIC_FUTURE": "dynamic, not in service yet",
    "BLOCKED": "blocked",
}
# While jobs still run on it, a node told to drain or fail is on its way there.
_BUSY = {"ALLOCATED", "MIXED", "COMPLETING"}


def split_state(text: str) -> tuple[str, list[str]]:
    """Slurm's "MIXED+DRAIN,COMPLETING" -> ("MIXED", ["DRAIN", "COMPLETING"])."""
    base, _, flags = str(text or "").partition("+")
    return base.strip().upper(), [flag.strip().upper() for flag in flags.split(",") if flag.strip()]


def _flag_words(flag: str, busy: bool) -> str:
    if flag == "DRAIN":
        return "draining" if busy else "drained"
    if flag == "FAIL":
        return "failing" if busy else "failed"
    return FLAG_WORDS.get(flag) or flag.lower().replace("_", " ")


def state_words(state: str, flags=()) -> str:
    """The words for a base state and its flags (a list, or Slurm's comma list)."""
    if isinstance(flags, str):
        flags = [flag.strip().upper() for flag in flags.split(",") if flag.strip()]
    state = (state or "UNKNOWN").upper()
    busy = state in _BUSY or "COMPLETING" in flags
    words = [BASE_WORDS.get(state) or state.lower().replace("_", " ")]
    if state == "IDLE" and "DRAIN" in flags:
        words = []  # "drained" says it: idle, and taking no jobs
    words += [_flag_words(flag, busy) for flag in flags]
    return ", ".join(dict.fromkeys(word for word in words if word))


def _parts(value) -> tuple[str, list[str]]:
    if isinstance(value, str):
        return split_state(value)
    flags = str(getattr(value, "state_flags", "") or "")
    return str(getattr(value, "state", "") or "").upper(), [f.strip().upper() for f in flags.split(",") if f.strip()]


def slurm_text(state: str, flags) -> str:
    """Slurm's own form: "IDLE+RESERVED,PLANNED"."""
    return state + (f"+{','.join(flags)}" if flags else "")


@register.filter
def node_state(value):
    """The state in words in a `.state` span, Slurm's term in its title (and data-node-state)."""
    state, flags = _parts(value)
    if not state:
        return ""
    raw = slurm_text(state, flags)
    return format_html(
        '<span class="state state-{}" title="Slurm: {}" data-node-state="{}">{}</span>',
        state.lower(),
        raw,
        raw,
        state_words(state, flags),
    )
