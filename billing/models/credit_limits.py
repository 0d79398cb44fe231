"""How much a pay-afterwards account may owe: an amount an admin approved (docs/product.md, Plans:
"an account may run up a bill only within a limit an admin approved")."""

from __future__ import annotations

from django.conf import settings
from django.core.validators import MinValueValidator
from django.db import models


class CreditLimit(models.Model):
    user = models.OneToOneField(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="credit_limit")
    amount = models.DecimalField(
        max_digits=12, decimal_places=2, validators=[MinValueValidator(1)], help_text="USD the account may owe"
    )
    reason = models.CharField(max_length=200, help_text="Why this limit (contract, deposit, history)")
    approved_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    approved_at = models.DateTimeField(null=True, blank=True)
    # The first day of the month whose "limit reached" e-mail went out (a conditional UPDATE).
    warned_for = models.DateField(null=True, blank=True)
    # Since when the account's waiting work is held in Slurm because what it owes, with its running
    # work, reached the limit (billing/actions/credit_limits.py, hold_work_at_limits); None: not held.
    work_held_at = models.DateTimeField(null=True, blank=True)

    def __str__(self):
        return f"{self.user}: may owe {self.amount}"
