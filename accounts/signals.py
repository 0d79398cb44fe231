"""Signals accounts send to the layers above it, which it must not import."""

from django.dispatch import Signal

# Sent inside the transaction that deactivates or deletes a user (kwargs: user_id). Receivers
# write their own rows in that transaction and defer anything external to on_commit.
account_deactivated = Signal()
