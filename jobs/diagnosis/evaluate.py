"""How well the diagnosis names real failures: `python -m jobs.diagnosis.evaluate [folder]`.

Reads the cited sample logs (by default jobs/tests/logs/real/), each a header and a log:

    # source: <URL of the public issue the log comes from>
    # expect: <rule id of the first finding, or "none" for a healthy run>
    # why: <one line>
    # state: <Slurm state, optional>    # exit_code: <int, optional>
    # ---
    <the log>

and prints, per sample, whether the first finding is the expected family, then the precision on failures
(named right / total) and the false findings on healthy runs.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from pathlib import Path

SAMPLES = Path(__file__).resolve().parents[1] / "tests" / "logs" / "real"
HEADER_END = "# ---"


@dataclass(frozen=True)
class Sample:
    name: str
    source: str
    expect: str  # a rule id, or "none"
    text: str
    state: str | None
    exit_code: int | None


def read_sample(path: Path) -> Sample:
    head, sep, text = path.read_text(encoding="utf-8").partition(HEADER_END + "\n")
    if not sep:
        raise ValueError(f"{path.name}: no '{HEADER_END}' line after the header")
    fields = {}
    for line in head.splitlines():
        key, _, value = line.removeprefix("# ").partition(":")
        fields[key.strip()] = value.strip()
    exit_code = fields.get("exit_code")
    return Sample(
        name=path.stem,
        source=fields["source"],
        expect=fields["expect"],
        text=text,
        state=fields.get("state") or None,
        exit_code=int(exit_code) if exit_code else None,
    )


def read_samples(folder: Path = SAMPLES) -> list[Sample]:
    return [read_sample(path) for path in sorted(folder.glob("*.log"))]


@dataclass(frozen=True)
class Result:
    sample: Sample
    got: str  # the first finding's rule id, or "none"

    @property
    def right(self) -> bool:
        return self.got == self.sample.expect


def evaluate(samples: list[Sample]) -> list[Result]:
    # Here, not at the top: the rules read Django settings when imported, and main() sets Django up first.
    from jobs.diagnosis.diagnose import diagnose

    results = []
    for sample in samples:
        findings = diagnose(sample.text, state=sample.state, exit_code=sample.exit_code)
        results.append(Result(sample, findings[0].rule_id if findings else "none"))
    return results


def report(results: list[Result]) -> str:
    failures = [r for r in results if r.sample.expect != "none"]
    healthy = [r for r in results if r.sample.expect == "none"]
    lines = [
        f"{'ok' if r.right else 'MISS':4}  {r.sample.name:40} expect {r.sample.expect:22} got {r.got}" for r in results
    ]
    named = sum(r.right for r in failures)
    false = sum(not r.right for r in healthy)
    families = len({r.sample.expect for r in failures})
    sources = len({r.sample.source for r in results})
    lines += [
        "",
        f"failures named right: {named}/{len(failures)} ({families} families)",
        f"healthy runs with a false finding: {false}/{len(healthy)}",
        f"samples: {len(results)} from {sources} cited sources",
    ]
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "gpupool.settings")
    os.environ.setdefault("DEBUG", "1")  # the explanations read settings (GPU types); no secret key needed
    import django

    django.setup()
    folder = Path(argv[0]) if argv else SAMPLES
    results = evaluate(read_samples(folder))
    print(report(results))
    return 0 if all(r.right for r in results) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
