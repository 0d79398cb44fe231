"""Small helpers over sequences."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TypeVar

T = TypeVar("T")


def batches(items: Sequence[T], size: int) -> Iterator[Sequence[T]]:
    """`items` in consecutive slices of at most `size` (itertools.batched from Python 3.12)."""
    for offset in range(0, len(items), size):
        yield items[offset : offset + size]
