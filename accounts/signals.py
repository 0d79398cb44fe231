"""Signals accounts send to the layers above it, which it must not import."""

from django.dispatch import Signal

# Sent inside the transaction that deactivates or deletes a user (kwargs: user_id). Receivers
# write their own rows in that transaction and defer anything external to on_commit.
account_deactivated = Signal()

# Sent after a user's cluster identity was created or changed (provisioning, a plan change
# re-provisioning the QOS), kwargs: user_id. Groups re-write the user's associations in their
# accounts (groups/receivers.py).
cluster_identity_changed = Signal()

# Sent after the transaction that changed a user's subscription commits (kwargs: user_id,
# before: the plan code left or None, after: the plan code now, status). Jobs end the work that
# still waits under a plan left for a lesser one (jobs/left_plan.py).
plan_changed = Signal()
