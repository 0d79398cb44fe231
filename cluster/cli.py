"""scontrol/sacctmgr for what slurmrestd cannot do: reservations, associations,
node drain/resume (and Unix users on the dev cluster).

Commands are argument lists run without a shell, behind a configurable prefix: on the
dev cluster `chroot <root>`, in production perhaps `ssh slurm-login`. Arguments are
checked against a conservative pattern first, because a prefix like `ssh` does hand
the remaining words to a remote shell.
"""

from __future__ import annotations

import logging
import re
import subprocess
from dataclasses import dataclass, field

from cluster.errors import SlurmCommandError, SlurmTransientError

log = logging.getLogger(__name__)

# Letters, digits and the punctuation Slurm's key=value syntax needs; no spaces, quotes,
# `;`, `$`, backticks, redirections or globs.
_SAFE_ARGUMENT = re.compile(r"[A-Za-z0-9_.,:=/@+%\-\[\]]*")
# Slurm's words for "the controller is not there right now".
_TRANSIENT_OUTPUT = (
    "Unable to contact slurm controller",
    "Socket timed out",
    "Connection refused",
    "Zero Bytes were transmitted",
)


@dataclass
class CommandResult:
    args: list[str]
    returncode: int
    stdout: str
    stderr: str


@dataclass
class SlurmCli:
    prefix: list[str]
    noop: bool = False
    timeout: float = 30.0
    executed: list[list[str]] = field(default_factory=list)

    def run(self, *args: str, check: bool = True, reason_argument: str | None = None) -> CommandResult:
        """Run prefix + args. `reason_argument` may hold spaces (a drain reason) and is
        appended as `Reason=<text>` after its own stricter check."""
        argv = list(args)
        for argument in argv:
            # fullmatch: `$` in re.match would let a trailing newline through.
            if not _SAFE_ARGUMENT.fullmatch(argument):
                raise ValueError(f"refusing unsafe Slurm command argument {argument!r}")
        if reason_argument is not None:
            if not re.fullmatch(r"[A-Za-z0-9_.,:/@+\- ]{1,200}", reason_argument):
                raise ValueError("a reason may hold letters, digits, spaces and .,:/@+-_ (at most 200)")
            argv.append(f"Reason={reason_argument}")
        full = [*self.prefix, *argv]
        self.executed.append(full)
        if self.noop:
            log.info("noop: would run %s", full)
            return CommandResult(full, 0, "", "")
        try:
            completed = subprocess.run(full, capture_output=True, text=True, timeout=self.timeout, check=False)
        except subprocess.TimeoutExpired as exc:
            raise SlurmTransientError(f"{argv[0]} did not finish within {self.timeout}s") from exc
        except OSError as exc:
            raise SlurmCommandError(f"cannot run {full[0]}: {exc}") from exc
        result = CommandResult(full, completed.returncode, completed.stdout, completed.stderr)
        if check and completed.returncode != 0:
            output = (completed.stderr or completed.stdout).strip()
            error_class = SlurmTransientError if any(t in output for t in _TRANSIENT_OUTPUT) else SlurmCommandError
            raise error_class(f"{' '.join(argv)} failed ({completed.returncode}): {output}")
        return result

    # --- the operations the portal needs -------------------------------------------------
    def drain_node(self, node: str, reason: str) -> CommandResult:
        return self.run("scontrol", "update", f"NodeName={node}", "State=DRAIN", reason_argument=reason)

    def resume_node(self, node: str) -> CommandResult:
        return self.run("scontrol", "update", f"NodeName={node}", "State=RESUME")

    def add_association(self, user: str, account: str, qos: list[str], default_qos: str) -> CommandResult:
        return self.run(
            "sacctmgr",
            "-i",
            "add",
            "user",
            user,
            f"Account={account}",
            f"QOS={','.join(qos)}",
            f"DefaultQOS={default_qos}",
            check=False,
        )

    def set_user_qos(self, user: str, qos: list[str], default_qos: str) -> CommandResult:
        return self.run(
            "sacctmgr",
            "-i",
            "modify",
            "user",
            "where",
            f"name={user}",
            "set",
            f"QOS={','.join(qos)}",
            f"DefaultQOS={default_qos}",
            # Lifts the hold `hold_user_submissions` puts on a deactivated account.
            "MaxSubmitJobs=-1",
            check=False,
        )

    def hold_user_submissions(self, user: str) -> CommandResult:
        """Slurm refuses every new job of the user from now on, from any submit host."""
        return self.run(
            "sacctmgr", "-i", "modify", "user", "where", f"name={user}", "set", "MaxSubmitJobs=0", check=False
        )

    def cancel_user_jobs(self, user: str) -> CommandResult:
        return self.run("scancel", f"--user={user}", check=False)

    def delete_association(self, user: str, account: str) -> CommandResult:
        return self.run("sacctmgr", "-i", "delete", "user", "where", f"name={user}", f"account={account}", check=False)

    def show_association(self, user: str) -> CommandResult:
        return self.run("sacctmgr", "-n", "-P", "show", "assoc", f"users={user}", "format=user,account,qos,defaultqos")
