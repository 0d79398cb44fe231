"""Recognise common GPU-job failures in a job's log and say the cause and the fix.

`diagnose()` reads the tail of a job's stdout+stderr (plus, when known, the Slurm state and exit code)
and returns findings, most specific first. The rules are data, in `jobs.diagnosis.rules` (what each failure
looks like, in priority order) and `jobs.diagnosis.explain` (tailoring a cause and fix to what matched: the Xid
code, the missing module, the HTTP status of a registry...); this module is the engine that applies them.

Line numbers count `\\n`-separated lines from 1; a finding from the state or the exit code alone has line
number 0 and says so in its evidence.
"""

from __future__ import annotations

import itertools
import logging
import re
from collections.abc import Callable
from dataclasses import dataclass

from jobs.diagnosis import contributed
from jobs.diagnosis.rules import RULES, Rule, Run, Stage

__all__ = [
    "EVIDENCE_MAX",
    "MAX_SCAN_CHARS",
    "RULES",
    "Diagnosis",
    "Finding",
    "Rule",
    "Run",
    "Stage",
    "diagnose",
    "diagnose_explained",
]

log = logging.getLogger(__name__)

EVIDENCE_MAX = 300
# The caller passes the tail of the log; this bounds the work whatever it passes.
MAX_SCAN_CHARS = 2 * 1024 * 1024


@dataclass(frozen=True)
class Finding:
    rule_id: str  # stable slug, e.g. "cuda-oom"
    title: str  # short, e.g. "CUDA out of memory"
    cause: str  # one or two plain sentences for a researcher
    fix: str  # what to do, concrete
    evidence: str  # the matching log line, stripped, at most 300 chars
    line_number: int  # 1-based line in the text given; 0 when the finding comes from the state or exit code alone


# --- matching ---------------------------------------------------------------------------------------------------


def _evidence_line(text: str, start: int, end: int) -> str:
    """The line holding text[start:end], narrowed to its `\\r` segment and to EVIDENCE_MAX chars around the match."""
    line_start = text.rfind("\n", 0, start) + 1
    line_end = text.find("\n", end)
    if line_end == -1:
        line_end = len(text)
    # Progress bars rewrite a line with "\r": keep only the segment that holds the match.
    cr = text.rfind("\r", line_start, start)
    if cr != -1:
        line_start = cr + 1
    cr = text.find("\r", end, line_end)
    if cr != -1 and text[cr + 1 : line_end].strip():
        line_end = cr
    # Skip leading blanks before deciding the window, so stripping does not eat into it.
    while line_start < start and text[line_start] in " \t\r\f\v":
        line_start += 1
    if line_end - line_start > EVIDENCE_MAX:
        lo = max(line_start, min(start - 80, line_end - EVIDENCE_MAX))
        line_start, line_end = lo, min(line_end, lo + EVIDENCE_MAX)
    snippet = text[line_start:line_end]
    snippet = "".join(ch if ch.isprintable() else " " for ch in snippet)
    return snippet.strip()[:EVIDENCE_MAX]


def _normalise_state(state: object) -> str:
    if not isinstance(state, str):
        return ""
    parts = state.strip().upper().split()
    # Slurm sometimes reports "CANCELLED by 1234" or a list "CANCELLED,COMPLETING".
    return parts[0].split(",")[0] if parts else ""


def _evidence_span(m: re.Match[str]) -> tuple[int, int]:
    """The part of a match that is the evidence: its group `at` when the pattern has one, else all of it."""
    if "at" in m.re.groupindex and m.start("at") != -1:
        return m.span("at")
    return m.span()


def _find_run(run: Run, text: str) -> re.Match[str] | None:
    """The match at which `run.pattern` has matched `run.count` times in a row, no more than `within_lines` apart."""
    length, last_line, last_pos = 0, 0, 0
    for m in run.pattern.finditer(text):
        line = last_line + text.count("\n", last_pos, m.start())
        length = length + 1 if length and line - last_line <= run.within_lines else 1
        if length >= run.count:
            return m
        last_line, last_pos = line, m.start()
    return None


def _search(rule: Rule, pattern: re.Pattern[str], text: str) -> re.Match[str] | None:
    """The first match of `pattern`, or None when the rule says the failure recovered after its last one."""
    m = pattern.search(text)
    if m is None or pattern not in rule.clearable:
        return m
    last = m
    for last in pattern.finditer(text, m.end()):  # noqa: B007 - only the last match matters
        pass
    if any(cleared.search(text, last.end()) for cleared in rule.cleared_by):
        return None
    return m


def _match_rule(
    rule: Rule, text: str, line_of: Callable[[int], int], state: str, exit_code: int | None
) -> Finding | None:
    log_allowed = rule.log_needs_exit_code is None or exit_code is None or exit_code in rule.log_needs_exit_code
    if log_allowed:
        # Lazily: the runs are counted only when no pattern matched.
        matches = (_search(rule, pattern, text) for pattern in rule.patterns)
        runs = (_find_run(run, text) for run in rule.runs)
        for m in itertools.chain(matches, runs):
            if m is None:
                continue
            start, end = _evidence_span(m)
            evidence = _evidence_line(text, start, end)
            cause, fix = rule.cause, rule.fix
            if rule.explain is not None:
                tailored = rule.explain(m, evidence)
                if tailored is not None:
                    cause, fix = tailored
            return Finding(rule.rule_id, rule.title, cause, fix, evidence, line_of(start))
    if state and state in rule.states:
        return Finding(rule.rule_id, rule.title, rule.cause, rule.fix, f"Slurm job state: {state}", 0)
    if exit_code is not None and exit_code in rule.exit_codes:
        return Finding(rule.rule_id, rule.title, rule.cause, rule.fix, f"Exit code: {exit_code}", 0)
    return None


# A terminal hard-wraps long lines at its width: many lines of exactly that length, none longer.
_MIN_WRAP_WIDTH = 60
_MIN_WRAPPED_LINES = 3
_MAX_WRAPPED_PARTS = 30


def _unwrap(text: str) -> tuple[str, list[int]] | None:
    """`text` with hard-wrapped lines joined again, and for each joined line the index of its first original line.

    None when the text does not look hard-wrapped: the longest lines must all have one length, at least
    _MIN_WRAP_WIDTH, and there must be at least _MIN_WRAPPED_LINES of them.
    """
    lines = text.split("\n")
    width = max((len(line.rstrip("\r")) for line in lines), default=0)
    if width < _MIN_WRAP_WIDTH:
        return None
    at_width = sum(1 for line in lines if len(line.rstrip("\r")) == width)
    # Lines that all have one length are a table or a repeated line, not a wrapped message.
    if not _MIN_WRAPPED_LINES <= at_width <= len(lines) // 2:
        return None
    joined: list[str] = []
    origin: list[int] = []
    parts = 0
    for index, line in enumerate(lines):
        if parts:
            joined[-1] += line
        else:
            joined.append(line)
            origin.append(index)
        # A message wraps onto a few lines; a joined line stays bounded.
        parts = parts + 1 if len(line.rstrip("\r")) == width and parts < _MAX_WRAPPED_PARTS else 0
    return "\n".join(joined), origin


@dataclass(frozen=True)
class Diagnosis:
    """The findings, best first, and in words why the first one won (what the evaluation prints)."""

    findings: list[Finding]
    why: str


# The shipped rules and those a site contributed (jobs/diagnosis/contributed/), ranked by stage all together.
SHIPPED_RULES: tuple[Rule, ...] = RULES + contributed.load()

# A catch-all is evidence, not a cause: it ranks after every cause found (stages up to LIMIT). Consequences
# (another process's NCCL errors, timeouts, kills) are not causes, so a rank's own error still comes before them.
_LAST_CAUSE_STAGE = Stage.LIMIT


def _rank(rule: Rule, order: int) -> tuple[float, int]:
    """Findings are ranked by causal stage, then by the rule's place in the table; a catch-all after every cause."""
    if rule.fallback:
        return max(rule.stage, _LAST_CAUSE_STAGE) + 0.5, order
    return rule.stage, order


@dataclass(frozen=True)
class _Found:
    rule: Rule
    order: int
    finding: Finding

    @property
    def rank(self) -> tuple[float, int]:
        return _rank(self.rule, self.order)


def _run_rules(
    rules: tuple[Rule, ...], text: str, line_of: Callable[[int], int], state: str, exit_code: int | None
) -> tuple[list[_Found], list[str]]:
    """Every rule's finding, ranked, the cascade applied; and what was set aside, in words."""
    found: list[_Found] = []
    for order, rule in enumerate(rules):
        try:
            finding = _match_rule(rule, text, line_of, state, exit_code)
        except Exception:  # a broken rule must not take the job page down
            log.exception("diagnosis rule %s failed", rule.rule_id)
            continue
        if finding is not None:
            found.append(_Found(rule, order, finding))
    ids = {item.rule.rule_id for item in found}
    kept, set_aside = [], []
    for item in found:
        rule = item.rule
        explained_by = ids.intersection(rule.suppressed_by)
        if explained_by:
            set_aside.append(f"{rule.rule_id} left out: {', '.join(sorted(explained_by))} explains it")
            continue
        # A catch-all speaks only when no specific failure of its stage or an earlier one was recognised.
        if rule.fallback:
            specific = next(
                (other.rule.rule_id for other in found if not other.rule.fallback and other.rule.stage <= rule.stage),
                None,
            )
            if specific is not None:
                set_aside.append(f"catch-all {rule.rule_id} left out: {specific} is specific")
                continue
        kept.append(item)
    kept.sort(key=lambda item: item.rank)
    return kept, set_aside


def _why(kept: list[_Found], set_aside: list[str]) -> str:
    if not kept:
        return "; ".join(["no rule matched", *set_aside])
    first = kept[0]
    stage = Stage(first.rule.stage).name.lower()
    if len(kept) == 1:
        reason = f"{first.rule.rule_id} won: the only finding kept (stage {stage})"
    else:
        second = kept[1]
        if second.rule.fallback and not first.rule.fallback:
            reason = f"{first.rule.rule_id} won: a specific cause outranks the catch-all {second.rule.rule_id}"
        elif first.rule.stage < second.rule.stage:
            reason = (
                f"{first.rule.rule_id} won: stage {stage} comes before "
                f"{Stage(second.rule.stage).name.lower()} ({second.rule.rule_id})"
            )
        else:
            reason = f"{first.rule.rule_id} won: same stage ({stage}) as {second.rule.rule_id}, earlier in the table"
    return "; ".join([reason, *set_aside])


def diagnose_explained(
    text: str,
    *,
    state: str | None = None,
    exit_code: int | None = None,
    max_findings: int = 5,
    extra_rules: tuple[Rule, ...] = (),
) -> Diagnosis:
    """`diagnose`, with why the first finding won. `extra_rules` (a site's own, failures.site_rules) join the
    shipped table, each ranked by its stage after the shipped rules of that stage."""
    if isinstance(text, bytes | bytearray):
        text = bytes(text).decode("utf-8", errors="replace")
    elif not isinstance(text, str):
        text = ""
    if not isinstance(exit_code, int) or isinstance(exit_code, bool):
        exit_code = None
    try:
        limit = int(max_findings)
    except (TypeError, ValueError):
        limit = 5
    if limit <= 0:
        return Diagnosis([], "no findings asked for")
    line_offset = 0
    if len(text) > MAX_SCAN_CHARS:
        cut = len(text) - MAX_SCAN_CHARS
        line_offset = text.count("\n", 0, cut)
        text = text[cut:]
    normalised_state = _normalise_state(state)
    rules = SHIPPED_RULES + tuple(extra_rules)

    def line_of(pos: int) -> int:
        return line_offset + text.count("\n", 0, pos) + 1

    kept, set_aside = _run_rules(rules, text, line_of, normalised_state, exit_code)
    unwrapped = _unwrap(text)
    if unwrapped is not None:
        # A terminal may have broken the very line that names the failure: read the joined lines too, and keep
        # what they add (line numbers still count the lines of the log as given).
        joined, origin = unwrapped

        def joined_line_of(pos: int) -> int:
            return line_offset + origin[joined.count("\n", 0, pos)] + 1

        again, again_set_aside = _run_rules(rules, joined, joined_line_of, normalised_state, exit_code)
        # Keep the joined reading when it names an earlier cause (or any, where the lines as given named none).
        if again and (not kept or again[0].rank < kept[0].rank):
            kept, set_aside = again, [*again_set_aside, "read with the terminal's wrapped lines joined"]
    return Diagnosis([item.finding for item in kept[:limit]], _why(kept, set_aside))


def diagnose(
    text: str,
    *,
    state: str | None = None,
    exit_code: int | None = None,
    max_findings: int = 5,
    extra_rules: tuple[Rule, ...] = (),
) -> list[Finding]:
    """The failures recognised in a job's log, most specific first, at most `max_findings` of them."""
    return diagnose_explained(
        text, state=state, exit_code=exit_code, max_findings=max_findings, extra_rules=extra_rules
    ).findings
