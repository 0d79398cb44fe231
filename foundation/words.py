"""Counts said as people say them: "1 task", "2 tasks", never "2 task(s)"."""


def counted(count: int, singular: str, plural: str | None = None) -> str:
    """`count` and the noun it needs ("1 node", "3 nodes"; an irregular plural given)."""
    return f"{count:,} {singular if count == 1 else (plural or singular + 's')}"
