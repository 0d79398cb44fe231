"""A user's monthly budget: e-mail at 80 % and 100 % of it, and optionally hold new
submissions at 100 %. The `warned_*` months make each e-mail go once a month (a conditional
UPDATE sets them, so two workers cannot both send)."""

from __future__ import annotations

from django.conf import settings
from django.core.validators import MinValueValidator
from django.db import models


class Budget(models.Model):
    user = models.OneToOneField(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="budget")
    monthly_amount = models.DecimalField(max_digits=12, decimal_places=2, validators=[MinValueValidator(1)])
    hold_at_limit = models.BooleanField(default=False, help_text="Refuse new submissions once the budget is spent")
    # The first day of the month for which the 80 % / 100 % e-mail went out.
    warned_80_for = models.DateField(null=True, blank=True)
    warned_100_for = models.DateField(null=True, blank=True)
    updated_at = models.DateTimeField(auto_now=True)

    def __str__(self):
        return f"{self.user}: {self.monthly_amount}/month"
