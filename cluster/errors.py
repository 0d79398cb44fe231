"""Failures of Slurm calls, sorted by what the caller should do about them.

- SlurmTransientError: try again later (daemon down, timeout, controller busy).
- SlurmAuthError: the token or user is not accepted; retrying will not help.
- SlurmRequestError: Slurm refused this request (bad spec, too many GPUs); permanent.
- SlurmNotFound: the object does not exist (a subclass of SlurmRequestError).
- SlurmPermissionDenied: the user may not do this to that object (e.g. cancel
  another user's job).
"""


class SlurmError(Exception):
    """`message` is for admins and logs (it may name URLs, paths, commands); `public_message`
    is what an ordinary user may read: Slurm's own words about their request at most."""

    transient = False
    public_default = "The cluster could not do this; an admin can see why."

    def __init__(
        self,
        message: str,
        *,
        error_number: int | None = None,
        status: int | None = None,
        public_message: str | None = None,
    ):
        super().__init__(message)
        self.message = message
        self.error_number = error_number
        self.status = status
        self.public_message = public_message or self.public_default


class SlurmTransientError(SlurmError):
    transient = True
    public_default = "The cluster's scheduler is not answering at the moment."


# A Celery task's options to try again while Slurm is away, with Celery's own back-off: 15 s,
# 30 s, 60 s ... at most 600 s between tries (`@shared_task(max_retries=8, **RETRY_WHILE_SLURM_IS_AWAY)`).
RETRY_WHILE_SLURM_IS_AWAY = {
    "autoretry_for": (SlurmTransientError,),
    "retry_backoff": 15,
    "retry_backoff_max": 600,
    "retry_jitter": False,
}


class SlurmAuthError(SlurmError):
    public_default = "The portal could not sign in to the cluster's scheduler; an admin can see why."


class SlurmRequestError(SlurmError):
    public_default = "Slurm refused the request."


class SlurmNotFound(SlurmRequestError):
    pass


class SlurmPermissionDenied(SlurmRequestError):
    pass


class SlurmCommandError(SlurmError):
    """A scontrol/sacctmgr command failed."""


# What scontrol and sacctmgr print when they refuse, in words an admin or a user reads; the
# command line and Slurm's own text stay in the error's `message` (logs, the audit's detail).
_NODE_STATE_REFUSED = (
    "Slurm refused that change from the node's present state: only a drained, down or failed node can be resumed."
)
_SLURM_OUTPUT_WORDS = (
    # 24.11 says "specified", 26.05 "transition"; resuming an idle node is the usual way to meet it.
    ("Invalid node state specified", _NODE_STATE_REFUSED),
    ("Invalid node state transition", _NODE_STATE_REFUSED),
    ("Requested nodes are busy", "The nodes asked for are busy in that window."),
    ("Requested node configuration is not available", "No node can hold that request (type, count or window)."),
    ("Reservation request overlaps", "It overlaps a reservation already made on those nodes."),
    ("Invalid reservation name", "Slurm does not know that reservation."),
    ("Access/permission denied", "The portal's Slurm user is not allowed to do this; an admin can check its rights."),
    ("Invalid node name specified", "Slurm does not know that node."),
    ("Invalid job id specified", "Slurm no longer knows that job."),
    ("Job/step already completing or completed", "The job has already ended."),
    ("Job has already finished", "The job has already ended."),
    ("Unable to contact slurm controller", "The cluster's scheduler is not answering."),
)
_SLURM_PREFIXES = (
    "slurm_update error: ",
    "scontrol: error: ",
    "sacctmgr: error: ",
    "Error updating reservation: ",
    "Error creating the reservation: ",
    "error: ",
)


def words_for_slurm_output(output: str) -> str:
    """A refusal's words: a known one in a sentence; otherwise Slurm's own text, its last line
    without the command's prefixes (never the command line)."""
    for needle, words in _SLURM_OUTPUT_WORDS:
        if needle.lower() in output.lower():
            return words
    line = next((line.strip() for line in reversed(output.strip().splitlines()) if line.strip()), "")
    for prefix in _SLURM_PREFIXES:
        if line.lower().startswith(prefix.lower()):
            line = line[len(prefix) :]
    line = line.strip().rstrip(".")
    return f"Slurm refused: {line[:1].upper()}{line[1:]}." if line else SlurmError.public_default
