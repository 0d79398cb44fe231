"""Billing's tables: rate cards (prices), usage records (what Slurm says each run used, and what
it came to), invoices with their lines and payments, budgets and credit limits."""

from billing.models.budgets import Budget
from billing.models.credit_limits import CreditLimit
from billing.models.invoices import Invoice, InvoiceFrozen, InvoiceLine, InvoiceNumber, Payment
from billing.models.rate_cards import CardInForce, RateCard, RateCardGpuPrice
from billing.models.usage import UsageRecord

__all__ = [
    "Budget",
    "CardInForce",
    "CreditLimit",
    "Invoice",
    "InvoiceFrozen",
    "InvoiceLine",
    "InvoiceNumber",
    "Payment",
    "RateCard",
    "RateCardGpuPrice",
    "UsageRecord",
]
