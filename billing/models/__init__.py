"""Billing's tables: usage records (what Slurm says each run used, and what it came to),
invoices with their lines and payments, budgets and credit limits. The prices (rate cards) are
the catalogue's: plans/rate_cards.py."""

from billing.models.budgets import Budget
from billing.models.credit_limits import CreditLimit
from billing.models.digests import DigestSent
from billing.models.invoices import Invoice, InvoiceFrozen, InvoiceLine, InvoiceNumber, Payment
from billing.models.usage import UsageRecord

__all__ = [
    "Budget",
    "CreditLimit",
    "DigestSent",
    "Invoice",
    "InvoiceFrozen",
    "InvoiceLine",
    "InvoiceNumber",
    "Payment",
    "UsageRecord",
]
