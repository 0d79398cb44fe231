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
from dataclasses import dataclass

from jobs.diagnosis.rules import RULES, Rule, Run

__all__ = ["EVIDENCE_MAX", "MAX_SCAN_CHARS", "RULES", "Finding", "Rule", "Run", "diagnose"]

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


def _match_rule(rule: Rule, text: str, line_offset: int, state: str, exit_code: int | None) -> Finding | None:
    log_allowed = rule.log_needs_exit_code is None or exit_code is None or exit_code in rule.log_needs_exit_code
    if log_allowed:
        # Lazily: the runs are counted only when no pattern matched.
        matches = (pattern.search(text) for pattern in rule.patterns)
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
            line_number = line_offset + text.count("\n", 0, start) + 1
            return Finding(rule.rule_id, rule.title, cause, fix, evidence, line_number)
    if state and state in rule.states:
        return Finding(rule.rule_id, rule.title, rule.cause, rule.fix, f"Slurm job state: {state}", 0)
    if exit_code is not None and exit_code in rule.exit_codes:
        return Finding(rule.rule_id, rule.title, rule.cause, rule.fix, f"Exit code: {exit_code}", 0)
    return None


def diagnose(
    text: str, *, state: str | None = None, exit_code: int | None = None, max_findings: int = 5
) -> list[Finding]:
    """The failures recognised in a job's log, most specific first, at most `max_findings` of them."""
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
        return []
    line_offset = 0
    if len(text) > MAX_SCAN_CHARS:
        cut = len(text) - MAX_SCAN_CHARS
        line_offset = text.count("\n", 0, cut)
        text = text[cut:]
    normalised_state = _normalise_state(state)

    findings: list[Finding] = []
    found: set[str] = set()
    for rule in RULES:
        if len(findings) >= limit:
            break
        if found.intersection(rule.suppressed_by):
            continue
        try:
            finding = _match_rule(rule, text, line_offset, normalised_state, exit_code)
        except Exception:  # a broken rule must not take the job page down
            log.exception("diagnosis rule %s failed", rule.rule_id)
            continue
        if finding is not None:
            findings.append(finding)
            found.add(rule.rule_id)
    return findings
