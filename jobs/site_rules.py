"""A site's own diagnosis rules, told to the job pages by a higher layer.

The rules an admin writes for failures nobody recognised are rows of `failures/`, above jobs/, and
jobs/ must not import it. So jobs/ keeps this registry, as it keeps `jobs.costs`: failures fills it in
its AppConfig.ready() (`register`), and the job page's diagnosis asks it (`current`). Without a
provider the shipped rules alone speak.
"""

from __future__ import annotations

from collections.abc import Callable

from jobs.diagnosis.rules import Rule

_provider: Callable[[], tuple[Rule, ...]] | None = None


def register(provider: Callable[[], tuple[Rule, ...]]) -> None:
    global _provider
    _provider = provider


def current() -> tuple[Rule, ...]:
    """The site's enabled rules, ready for `jobs.diagnosis.diagnose.diagnose(extra_rules=...)`."""
    return _provider() if _provider is not None else ()
