"""Rules exported by a site (failures/ "export") that joined the shipped set: jobs/diagnosis/contributed/*.json.

The file is what the admins' page writes: {"format": "gpupool-diagnosis-rules/1", "rules": [{"rule_id",
"title", "cause", "fix", "patterns": [...], "stage": "program"}, ...]}. Its patterns were written for RE2,
whose syntax Python's `re` reads the same (RE2 has no look-arounds or back-references to differ on).
A file that does not load stops the import: a broken contribution must fail the tests, not vanish.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from jobs.diagnosis.rules import Rule, Stage

FOLDER = Path(__file__).resolve().parent / "contributed"
FORMAT = "gpupool-diagnosis-rules/1"


def rules_from(document: dict, source: str = "") -> tuple[Rule, ...]:
    if document.get("format") != FORMAT:
        raise ValueError(f"{source}: not a file of {FORMAT}")
    rules = []
    for entry in document.get("rules", []):
        rules.append(
            Rule(
                rule_id=str(entry["rule_id"]),
                title=str(entry["title"]),
                cause=str(entry["cause"]),
                fix=str(entry["fix"]),
                patterns=tuple(re.compile(pattern, re.MULTILINE) for pattern in entry["patterns"]),
                stage=Stage[str(entry["stage"]).upper()],
            )
        )
    return tuple(rules)


def load(folder: Path = FOLDER) -> tuple[Rule, ...]:
    rules: list[Rule] = []
    for path in sorted(folder.glob("*.json")):
        rules.extend(rules_from(json.loads(path.read_text(encoding="utf-8")), path.name))
    return tuple(rules)
