"""Credits' actions: every write of credits, atomic under the account's row lock and keyed for
idempotency, a person's act audited, one module per concern, its body here (docs/architecture.md,
"The skeleton of an app"):

- `ledger`: append-only entries and the lots that expire; balances are sums of them;
- `grants`: the sign-up, tutorial and referral grants, held for review when they look wrong;
- `campaigns`: marketing's campaigns and their budgets.

Views, the API, tasks, the admin and other apps call these; the most used are named here.
"""

from credits.actions.campaigns import approve as approve_campaign
from credits.actions.campaigns import create_campaign
from credits.actions.grants import decide as decide_held_grant
from credits.actions.ledger import adjust, grant, reverse, spend

__all__ = ["adjust", "approve_campaign", "create_campaign", "decide_held_grant", "grant", "reverse", "spend"]
