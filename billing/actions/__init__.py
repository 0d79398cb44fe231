"""Billing's actions: every write of billing that touches several tables, atomic and (where a
person acts) audited, one module per concern, its body here (docs/architecture.md, "The
skeleton of an app"):

- `charging`: a usage record priced by the plan held at the run's start, credits first,
  included hours next, onto its owner's draft;
- `closing`: a month closed, its drafts issued; `invoicing`: drafts built, frozen, numbered,
  voided; `payments`: money received;
- `credit_limits`, `budgets`: what a pay-afterwards account may owe, a group's budget;
- `reserved_time`: an ended reservation's unused time metered and charged.

Views, the API, tasks, the admin and other apps call these; the most used are named here.
gpupool/tests/test_layers.py holds every function that opens a transaction, when called from
another app or an entry module, to an `actions` module.
"""

from billing.actions.charging import charge
from billing.actions.closing import close as close_month
from billing.actions.credit_limits import approve_credit_limit
from billing.actions.invoicing import issue_invoice, void_invoice
from billing.actions.payments import record_payment
from billing.actions.reserved_time import meter_reservation

__all__ = [
    "approve_credit_limit",
    "charge",
    "close_month",
    "issue_invoice",
    "meter_reservation",
    "record_payment",
    "void_invoice",
]
