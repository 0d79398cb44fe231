"""How many credits (RTX 4090 GPU-seconds) one GPU-second of each type burns.

Weights are rows (`BurnWeight`, admin-edited, a change is a new row from a moment on). The
seed puts each type at its list-price ratio to the RTX 4090 (the list card's prices at the
time of writing: RTX 4090 $0.00048/s, A100 $0.0015/s, H100 $0.0024/s), so a credit is worth
the same money whatever GPU it runs on. They are copied here, not read from billing: credits
sit beside billing and never import it; when prices change, an admin adds new weights.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal

from django.utils import timezone

from credits.models import BurnWeight

SEED_WEIGHTS = {"rtx4090": Decimal("1"), "a100": Decimal("3.125"), "h100": Decimal("5")}


class NoBurnWeight(LookupError):
    def __init__(self, gpu_type: str):
        super().__init__(f"no credit burn weight for GPU type {gpu_type!r}; an admin adds one in Django admin")
        self.gpu_type = gpu_type


def seed_weights(model=BurnWeight) -> int:
    """The seed weights for types that have none (a migration and the tests call this)."""
    created = 0
    for gpu_type, weight in SEED_WEIGHTS.items():
        if not model.objects.filter(gpu_type=gpu_type).exists():
            model.objects.create(
                gpu_type=gpu_type,
                credits_per_gpu_second=weight,
                effective_from=datetime(2020, 1, 1, tzinfo=UTC),
                note="seed: list-price ratio to the RTX 4090",
            )
            created += 1
    return created


def weight_for(gpu_type: str, moment=None) -> Decimal:
    row = (
        BurnWeight.objects.filter(gpu_type=gpu_type, effective_from__lte=moment or timezone.now())
        .order_by("-effective_from")
        .values_list("credits_per_gpu_second", flat=True)
        .first()
    )
    if row is None:
        raise NoBurnWeight(gpu_type)
    return row


@dataclass(frozen=True)
class Burn:
    credits: int
    covered_gpu_seconds: int


def burn(gpu_seconds: int, weight: Decimal, available: int) -> Burn:
    """Credits taken for `gpu_seconds` at `weight` out of `available`: all of it when the
    credits suffice (rounded up to a whole credit), else the whole GPU-seconds they cover
    (rounded down) and the credits those cost. Integers and Decimals only."""
    needed = math.ceil(gpu_seconds * weight)
    if needed <= available:
        return Burn(credits=needed, covered_gpu_seconds=gpu_seconds)
    covered = math.floor(Decimal(available) / weight)
    return Burn(credits=math.ceil(covered * weight), covered_gpu_seconds=covered)
