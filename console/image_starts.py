"""How long images took to start, per image, for Console → Images: the first start on each node
(the one that mounted a freshly prewarmed file, or pulled where the node had none) beside the
median of the starts after it. Read from `jobs.ContainerStart` (jobs/container_starts.py)."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal
from statistics import median

from django.utils import timezone

from jobs.models import ContainerStart

WINDOW = timedelta(days=90)


def start_times_by_image() -> dict[str, dict]:
    """{image: {"first": {node: seconds}, "first_max": s, "warm_median": s | None, "count": n}}."""
    rows = (
        ContainerStart.objects.filter(launched_at__gte=timezone.now() - WINDOW)
        .order_by("image", "node", "launched_at")
        .values_list("image", "node", "seconds")
    )
    result: dict[str, dict] = {}
    warm: dict[str, list[Decimal]] = {}
    for image, node, seconds in rows:
        entry = result.setdefault(image, {"first": {}, "count": 0})
        entry["count"] += 1
        if node in entry["first"]:
            warm.setdefault(image, []).append(seconds)
        else:
            entry["first"][node] = seconds
    for image, entry in result.items():
        entry["first_max"] = max(entry["first"].values())
        later = warm.get(image)
        entry["warm_median"] = median(later) if later else None
    return result
