"""The group page's chart data: GPU-hours by member, one stacked trace per GPU type
(static/js/group_usage.js draws it with Plotly). Numbers as decimal strings."""

from __future__ import annotations


def usage_chart(rows: list[dict]) -> dict:
    members = sorted({row["user"] for row in rows})
    types = sorted({row["gpu_type"] for row in rows})
    hours = {(row["user"], row["gpu_type"]): row["gpu_hours"] for row in rows}
    return {
        "members": members,
        "traces": [
            {"name": gpu_type, "hours": [str(hours.get((member, gpu_type), "0")) for member in members]}
            for gpu_type in types
        ],
    }
