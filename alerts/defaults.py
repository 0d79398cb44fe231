"""The rule the product ships with (the article's): node GPU memory > 90 % for 5 minutes
emails the admins. Created by migration 0002; tests create it the same way."""

DEFAULT_RULE = {
    "name": "GPU memory above 90% for 5 minutes",
    "metric": "memory_used_percent",
    "threshold": 90.0,
    "window_seconds": 300,
    "cooldown_seconds": 1800,
    "enabled": True,
    "email_admins": True,
}


IDLE_ALLOCATED_RULE = {
    "name": "Allocated GPU under 5% compute for 30 minutes",
    "metric": "idle_allocated",
    "threshold": 5.0,
    "window_seconds": 1800,
    "cooldown_seconds": 3600,
    "enabled": True,
    "email_admins": False,
}


def ensure_idle_allocated_rule(rule_model) -> None:
    values = dict(IDLE_ALLOCATED_RULE)
    rule_model.objects.get_or_create(name=values.pop("name"), defaults=values)


def ensure_default_rule(rule_model) -> None:
    """`rule_model` is AlertRule, or the historical model inside a migration."""
    values = dict(DEFAULT_RULE)
    rule_model.objects.get_or_create(name=values.pop("name"), defaults=values)
