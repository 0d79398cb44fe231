"""Failures of Slurm calls, sorted by what the caller should do about them.

- SlurmTransientError: try again later (daemon down, timeout, controller busy).
- SlurmAuthError: the token or user is not accepted; retrying will not help.
- SlurmRequestError: Slurm refused this request (bad spec, too many GPUs); permanent.
- SlurmNotFound: the object does not exist (a subclass of SlurmRequestError).
- SlurmPermissionDenied: the user may not do this to that object (e.g. cancel
  another user's job).
"""


class SlurmError(Exception):
    transient = False

    def __init__(self, message: str, *, error_number: int | None = None, status: int | None = None):
        super().__init__(message)
        self.message = message
        self.error_number = error_number
        self.status = status


class SlurmTransientError(SlurmError):
    transient = True


class SlurmAuthError(SlurmError):
    pass


class SlurmRequestError(SlurmError):
    pass


class SlurmNotFound(SlurmRequestError):
    pass


class SlurmPermissionDenied(SlurmRequestError):
    pass


class SlurmCommandError(SlurmError):
    """A scontrol/sacctmgr command failed."""
