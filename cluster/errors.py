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
