"""A site rule's pattern, checked and compiled, and the enabled rules as the engine takes them.

Admins write the patterns, and they run over every failed job's log: RE2 (google-re2) matches in
time linear in the log whatever the pattern, where Python's `re` can take exponential time on a
careless one. Its syntax is Python's without look-arounds and back-references; named groups are
refused (the engine gives a group named `at` a meaning of its own).
"""

from __future__ import annotations

import logging

import re2

from failures.models import SiteRule
from jobs.diagnosis.rules import Rule, Stage

log = logging.getLogger(__name__)

MAX_PATTERN_CHARS = 500
_OPTIONS = re2.Options()
_OPTIONS.log_errors = False  # a refused pattern is the admin's message, not a line in the server's log


class PatternError(ValueError):
    """Why a pattern was refused, in words the admin reads."""


def compile_pattern(pattern: str):
    """The compiled pattern (multi-line: `^` and `$` at each line), or PatternError."""
    text = (pattern or "").strip()
    if not text:
        raise PatternError("Write a pattern: a piece of the error line, e.g. MyLibError: shard \\d+ is corrupt")
    if len(text) > MAX_PATTERN_CHARS:
        raise PatternError(f"A pattern has at most {MAX_PATTERN_CHARS} characters.")
    if "(?P<" in text or "(?<" in text:
        raise PatternError("Named groups are not needed: write the pattern without (?P<name>...).")
    try:
        compiled = re2.compile("(?m)" + text, options=_OPTIONS)
    except re2.error as exc:
        detail = exc.args[0].decode(errors="replace") if exc.args and isinstance(exc.args[0], bytes) else str(exc)
        raise PatternError(f"The matcher does not understand this pattern ({detail}).") from None
    if compiled.search("") is not None or compiled.search("\n") is not None:
        raise PatternError("This pattern matches an empty log, so it would flag every job: make it name the error.")
    return compiled


def as_rule(row: SiteRule) -> Rule:
    return Rule(
        rule_id=row.rule_id,
        title=row.title,
        cause=row.cause,
        fix=row.fix,
        patterns=(compile_pattern(row.pattern),),
        stage=Stage(row.stage),
    )


# Compiled once per version of a row: a job page asks for the enabled rules on every view.
_compiled: dict[tuple[int, str], Rule] = {}


def enabled_rules() -> tuple[Rule, ...]:
    """The site's enabled rules, as `jobs.site_rules` hands them to the diagnosis."""
    rules = []
    for row in SiteRule.objects.filter(enabled=True).order_by("stage", "slug"):
        key = (row.pk, row.updated_at.isoformat())
        if key not in _compiled:
            try:
                _compiled[key] = as_rule(row)
            except PatternError:
                # Checked when written; a row edited behind the portal's back is skipped, not fatal.
                log.warning("site rule %s has a pattern that does not compile; skipped", row.rule_id)
                continue
        rules.append(_compiled[key])
    return tuple(rules)
