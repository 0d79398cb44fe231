"""Plans' actions: writes that touch several tables, atomic and audited (docs/architecture.md,
"The skeleton of an app"). Here, a scheduled rate card withdrawn; `subscriptions`, a user's
plan history (the one writer of Subscription rows)."""

from __future__ import annotations

from django.db import transaction

from audit.log import record
from plans.models import RateCard
from plans.rates import card_state


def withdraw_rate_card(actor, card: RateCard) -> None:
    """Delete a scheduled (not yet in force) rate card and audit it, in one transaction: the
    card in force before it stays in force. The admin checks that the card is not in force."""
    before = card_state(card)
    target = f"rate_card:{card.code}@{card.effective_from.isoformat()}"
    with transaction.atomic():
        card.delete()
        record(actor, "rate_card.delete", target, before=before)
