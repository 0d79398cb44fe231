from django.dispatch import Signal

# Sent after the transaction that committed a version (uploading -> verifying) commits;
# keyword `version_id`. datasets.receivers enqueues the verification.
version_committed = Signal()
