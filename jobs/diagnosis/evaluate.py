"""How well the diagnosis names real failures: `python -m jobs.diagnosis.evaluate [folder]`.

Reads the cited sample logs (by default jobs/tests/logs/real/), each a header and a log:

    # source: <URL of the public issue the log comes from>
    # expect: <rule id of the first finding, or "none" for a healthy run>
    # why: <one line>
    # set: rules | held-out
    # collected: <date, held-out samples>       (optional)
    # sha256: <hex digest of the log below>     (optional)
    # state: <Slurm state, optional>    # exit_code: <int, optional>
    # ---
    <the log>

`set` says whether the rules were written against the sample (`rules`) or it was collected after them and the
rules were not changed to fit it at that time (`held-out`): only the held-out figures say how the diagnosis does
on logs it never saw. The log is whole lines copied verbatim from the source, in their order (lines may be left
out, never edited); `sha256` fixes the text as it was collected, so an edit of the log text shows as a mismatch.

For each set it prints, per sample, whether the first finding is the expected family, then the failures named
right, those named wrong (misdiagnosed) or not at all, and the false findings on healthy runs.
"""

from __future__ import annotations

import hashlib
import os
import sys
from dataclasses import dataclass
from pathlib import Path

SAMPLES = Path(__file__).resolve().parents[1] / "tests" / "logs" / "real"
HEADER_END = "# ---"
SETS = ("rules", "held-out")


@dataclass(frozen=True)
class Sample:
    name: str
    source: str
    expect: str  # a rule id, or "none"
    text: str
    state: str | None
    exit_code: int | None
    set: str = "rules"  # one of SETS
    sha256: str | None = None  # of `text` as collected
    collected: str | None = None  # when a held-out sample was collected (after the rules it measures)

    @property
    def verbatim(self) -> bool:
        """The log text is the one whose digest the header records."""
        return self.sha256 is not None and hashlib.sha256(self.text.encode("utf-8")).hexdigest() == self.sha256


def read_sample(path: Path) -> Sample:
    head, sep, text = path.read_text(encoding="utf-8").partition(HEADER_END + "\n")
    if not sep:
        raise ValueError(f"{path.name}: no '{HEADER_END}' line after the header")
    fields = {}
    for line in head.splitlines():
        key, _, value = line.removeprefix("# ").partition(":")
        fields[key.strip()] = value.strip()
    sample_set = fields.get("set", "")
    if sample_set not in SETS:
        raise ValueError(f"{path.name}: '# set:' must be one of {', '.join(SETS)}, not {sample_set!r}")
    if sample_set == "held-out" and not fields.get("collected"):
        raise ValueError(f"{path.name}: a held-out sample says when it was collected ('# collected:')")
    exit_code = fields.get("exit_code")
    return Sample(
        name=path.stem,
        source=fields["source"],
        expect=fields["expect"],
        text=text,
        state=fields.get("state") or None,
        exit_code=int(exit_code) if exit_code else None,
        set=sample_set,
        sha256=fields.get("sha256") or None,
        collected=fields.get("collected") or None,
    )


def read_samples(folder: Path = SAMPLES) -> list[Sample]:
    return [read_sample(path) for path in sorted(folder.glob("*.log"))]


@dataclass(frozen=True)
class Result:
    sample: Sample
    got: str  # the first finding's rule id, or "none"
    why: str = ""  # why the first finding won (jobs.diagnosis.diagnose.Diagnosis.why)

    @property
    def right(self) -> bool:
        return self.got == self.sample.expect


def evaluate(samples: list[Sample]) -> list[Result]:
    # Here, not at the top: the rules read Django settings when imported, and main() sets Django up first.
    from jobs.diagnosis.diagnose import diagnose_explained

    results = []
    for sample in samples:
        diagnosis = diagnose_explained(sample.text, state=sample.state, exit_code=sample.exit_code)
        first = diagnosis.findings[0].rule_id if diagnosis.findings else "none"
        results.append(Result(sample, first, diagnosis.why))
    return results


@dataclass(frozen=True)
class Figures:
    """One set's figures: failures named right, named wrong (another family first), missed; healthy runs flagged."""

    failures: int
    named: int
    misdiagnosed: int
    missed: int
    healthy: int
    false_findings: int
    families: int
    sources: int

    @property
    def precision(self) -> float | None:
        """Of the findings given first, the share that were right (healthy runs flagged count as wrong)."""
        given = self.named + self.misdiagnosed + self.false_findings
        return self.named / given if given else None


def figures(results: list[Result]) -> Figures:
    failures = [r for r in results if r.sample.expect != "none"]
    healthy = [r for r in results if r.sample.expect == "none"]
    return Figures(
        failures=len(failures),
        named=sum(r.right for r in failures),
        misdiagnosed=sum(not r.right and r.got != "none" for r in failures),
        missed=sum(r.got == "none" for r in failures),
        healthy=len(healthy),
        false_findings=sum(not r.right for r in healthy),
        families=len({r.sample.expect for r in failures}),
        sources=len({r.sample.source for r in results}),
    )


@dataclass(frozen=True)
class FamilyFigures:
    """One family's figures in a set: its failures named right, and how precise it is when it speaks first."""

    family: str
    expected: int  # samples whose cause is this family
    named: int  # of those, named right first
    given_first: int  # samples where this family came first (right or not, healthy runs included)

    @property
    def precision(self) -> float | None:
        return self.named / self.given_first if self.given_first else None


def per_family(results: list[Result]) -> list[FamilyFigures]:
    families = sorted({r.sample.expect for r in results} | {r.got for r in results} - {"none"})
    return [
        FamilyFigures(
            family,
            expected=sum(r.sample.expect == family for r in results),
            named=sum(r.sample.expect == family and r.right for r in results),
            given_first=sum(r.got == family for r in results),
        )
        for family in families
        if family != "none"
    ]


def confusion(results: list[Result]) -> dict[tuple[str, str], int]:
    """(expected, got) for every sample whose first finding was not the expected one, counted."""
    pairs: dict[tuple[str, str], int] = {}
    for r in results:
        if not r.right:
            key = (r.sample.expect, r.got)
            pairs[key] = pairs.get(key, 0) + 1
    return pairs


def _percent(part: int, whole: int) -> str:
    return f"{100 * part / whole:.0f} %" if whole else "-"


def report(results: list[Result]) -> str:
    lines = []
    for name in SETS:
        chosen = [r for r in results if r.sample.set == name]
        if not chosen:
            continue
        f = figures(chosen)
        lines += [f"== {name} ({len(chosen)} samples from {f.sources} cited sources)"]
        for r in chosen:
            lines.append(f"{'ok' if r.right else 'MISS':4}  {r.sample.name:40} expect {r.sample.expect:22} got {r.got}")
            lines.append(f"      why: {r.why}")
        precision = "-" if f.precision is None else f"{100 * f.precision:.0f} %"
        lines += [
            f"{name}: failures named right: {f.named}/{f.failures} ({_percent(f.named, f.failures)}, "
            f"{f.families} families); misdiagnosed: {f.misdiagnosed}; not recognised: {f.missed}",
            f"{name}: healthy runs with a false finding: {f.false_findings}/{f.healthy}",
            f"{name}: precision of the first finding: {precision}",
            f"{name}: per family (named right / samples of it, precision when first):",
        ]
        for fam in per_family(chosen):
            fam_precision = "-" if fam.precision is None else f"{100 * fam.precision:.0f} %"
            lines.append(f"    {fam.family:24} {fam.named}/{fam.expected}  precision {fam_precision}")
        pairs = confusion(chosen)
        lines.append(
            f"{name}: confusion (expected -> got): "
            + (", ".join(f"{expect} -> {got} x{count}" for (expect, got), count in sorted(pairs.items())) or "none")
        )
        lines.append("")
    return "\n".join(lines).rstrip("\n")


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
