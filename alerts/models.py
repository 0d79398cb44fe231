from django.db import models


class AlertRule(models.Model):
    """A condition on one node's GPUs that must hold for `window_seconds` to open an alert.

    The article's rule ships by default (migration 0002): node GPU memory > 90 % for
    5 minutes emails the admins. Migration 0003 adds an allocated GPU under 5 % compute for 30
    minutes (shown on the alerts page; admins may have it emailed).
    """

    class Metric(models.TextChoices):
        MEMORY_USED_PERCENT = "memory_used_percent", "GPU memory used (%)"
        COMPUTE_UTIL = "compute_util", "Compute utilisation (%)"
        TEMPERATURE_C = "temperature_c", "Temperature (°C)"
        # Holds when BELOW the threshold: a GPU a running job holds and does not use.
        IDLE_ALLOCATED = "idle_allocated", "Compute of a GPU a job holds (%), under"

    name = models.CharField(max_length=100, unique=True)
    metric = models.CharField(max_length=32, choices=Metric.choices)
    threshold = models.FloatField()
    window_seconds = models.PositiveIntegerField(default=300)
    # After an episode ends, the same node does not alert again for this long.
    cooldown_seconds = models.PositiveIntegerField(default=1800)
    enabled = models.BooleanField(default=True)
    email_admins = models.BooleanField(default=True)

    def __str__(self):
        return self.name


class Alert(models.Model):
    """One episode: opened when the rule first holds for its window, resolved when not."""

    rule = models.ForeignKey(AlertRule, on_delete=models.CASCADE, related_name="alerts")
    node = models.CharField(max_length=100)
    opened_at = models.DateTimeField()
    resolved_at = models.DateTimeField(null=True, blank=True)
    value = models.FloatField()
    detail = models.CharField(max_length=500)
    notified_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-opened_at"]
        constraints = [
            # At most one open episode per rule and node: the database enforces "not twice".
            models.UniqueConstraint(
                fields=["rule", "node"],
                condition=models.Q(resolved_at__isnull=True),
                name="one_open_alert_per_rule_node",
            )
        ]

    def __str__(self):
        return f"{self.rule} on {self.node}"

    @property
    def is_open(self) -> bool:
        return self.resolved_at is None
