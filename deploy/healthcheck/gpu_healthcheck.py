#!/usr/bin/env python3
"""GPU node health check for Slurm (slurm.conf ``HealthCheckProgram``, every 30 s).

Checks, on the node it runs on:

1. the NVIDIA driver answers ``nvidia-smi`` within a timeout (5 s) and shows at least
   as many GPUs as Slurm has configured for the node;
2. no GPU has had more than 95 % of its memory used on 3 consecutive checks while
   *no Slurm job holds it* (a job may legitimately fill its GPU; memory held on a GPU
   that no job owns is a leak: a zombie process, a stuck context).

A failing node is drained with ``Reason="gpu_healthcheck: <why>"``; a node that this
program drained and that passes again is resumed. Nodes drained by anybody else are
never touched. See README.md next to this file.

Standalone on purpose: Python 3.9+ standard library only, no Django, nothing from the
portal. The decision (``evaluate``) is a pure function; the I/O around it is thin and
takes an injectable ``runner`` so that tests need neither a GPU nor Slurm.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field

try:  # Linux has it; the script must still run (and be tested) where it does not.
    import syslog
except ImportError:  # pragma: no cover
    syslog = None  # type: ignore[assignment]

try:
    import fcntl
except ImportError:  # pragma: no cover
    fcntl = None  # type: ignore[assignment]

REASON_PREFIX = "gpu_healthcheck:"
MAX_REASON_LENGTH = 200
DEFAULT_STATE_FILE = "/var/lib/gpupool-healthcheck/state.json"
STATE_VERSION = 1
# minor_number is asked for on top of what the check needs so that Slurm's GRES index
# (device-file order, /dev/nvidia<minor>) can be mapped to nvidia-smi's index (PCI order).
NVIDIA_SMI_QUERY = "index,uuid,minor_number,memory.used,memory.total"
SCONTROL_TIMEOUT = 10.0
# slurmd starts health checks with a bare environment; look where the tools usually are.
FALLBACK_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
NODE_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
# Printable, and harmless inside double quotes in a shell (an admin will paste it).
REASON_UNSAFE_RE = re.compile(r"[^A-Za-z0-9 .,:;_%()/<>=+'@#-]")
# Slurm appends " [user@time]" to a reason when it shows it.
REASON_STAMP_RE = re.compile(r"\s*\[[^\[\]]*@[^\[\]]*\]\s*$")


# --------------------------------------------------------------------------- types


@dataclass(frozen=True)
class Config:
    timeout: float = 5.0
    threshold: float = 0.95
    consecutive: int = 3
    resume_after: int = 1
    slurm_index_by: str = "minor"  # or "index": how Slurm's GRES index maps to a GPU


@dataclass(frozen=True)
class GpuSample:
    index: int  # nvidia-smi's index
    uuid: str = ""
    minor: int | None = None  # /dev/nvidia<minor>; None when nvidia-smi says N/A
    used_mib: float | None = None
    total_mib: float | None = None

    @property
    def key(self) -> str:
        """Stable name for the state file: the UUID survives index renumbering."""
        return self.uuid or f"index-{self.index}"

    @property
    def fraction(self) -> float | None:
        if self.used_mib is None or not self.total_mib:
            return None
        return self.used_mib / self.total_mib


@dataclass(frozen=True)
class Observation:
    """Everything one check saw. Built by ``observe``; hand-made in tests."""

    node: str
    gpus: tuple[GpuSample, ...] = ()
    smi_timed_out: bool = False
    smi_error: str = ""  # non-empty: nvidia-smi missing, failed or unreadable
    expected_gpus: int | None = None  # None: unknown, the count is not checked
    node_known: bool = True  # False: scontrol show node did not answer
    node_state: str = ""  # e.g. "MIXED+DRAIN"
    node_reason: str = ""  # without Slurm's " [user@time]" stamp
    allocated: frozenset[int] | None = frozenset()  # Slurm GRES indexes held by jobs; None: unknown


@dataclass
class State:
    """What survives between two runs: consecutive-high counters per GPU key."""

    high: dict[str, int] = field(default_factory=dict)
    healthy_streak: int = 0
    node: str = ""

    def to_json(self) -> str:
        return json.dumps({"version": STATE_VERSION, **asdict(self)}, sort_keys=True)

    @classmethod
    def from_json(cls, text: str, node: str = "") -> State:
        """Parse a state file; anything unexpected gives a fresh state (never an error)."""
        try:
            data = json.loads(text)
        except ValueError:
            return cls(node=node)
        if not isinstance(data, dict) or data.get("version") != STATE_VERSION:
            return cls(node=node)
        if node and data.get("node") not in ("", node):
            return cls(node=node)  # another node's file (shared /var/lib?): not ours to trust
        high = data.get("high")
        streak = data.get("healthy_streak")
        clean = {}
        if isinstance(high, dict):
            clean = {str(k): v for k, v in high.items() if isinstance(v, int) and v > 0}
        if not isinstance(streak, int) or streak < 0:
            streak = 0
        return cls(high=clean, healthy_streak=streak, node=node or str(data.get("node") or ""))


@dataclass(frozen=True)
class Decision:
    action: str  # "none" | "drain" | "resume"
    reason: str  # the full drain reason (with prefix) when failing, else ""
    new_state: State
    failures: tuple[str, ...] = ()
    note: str = ""  # why the action is what it is, for the log line


# ----------------------------------------------------------------- pure helpers


def sanitize_reason(text: str, limit: int = MAX_REASON_LENGTH) -> str:
    """One line of a safe charset, at most ``limit`` characters."""
    text = REASON_UNSAFE_RE.sub(" ", text.replace("\n", " ").replace("\r", " "))
    text = re.sub(r"\s+", " ", text).strip()
    if len(text) > limit:
        text = text[: limit - 3].rstrip() + "..."
    return text


def build_reason(failures: Sequence[str]) -> str:
    return sanitize_reason(f"{REASON_PREFIX} {'; '.join(failures)}")


def is_our_reason(reason: str) -> bool:
    return reason.strip().startswith(REASON_PREFIX)


def state_flags(node_state: str) -> tuple[str, frozenset[str]]:
    """``"MIXED+DRAIN"`` -> ("MIXED", {"DRAIN"}); sinfo-style suffixes (``*~#``) are dropped."""
    parts = [p.strip().rstrip("*~#!%$@^-").upper() for p in node_state.split("+") if p.strip()]
    if not parts:
        return "", frozenset()
    return parts[0], frozenset(parts[1:])


def is_drained(node_state: str) -> bool:
    base, flags = state_flags(node_state)
    return bool({base, *flags} & {"DRAIN", "DRAINED", "DRAINING"})


def is_out_of_service(node_state: str) -> bool:
    """Drained, failed or down: someone (an admin, slurmctld) already took it out."""
    base, flags = state_flags(node_state)
    return is_drained(node_state) or "FAIL" in flags or base in ("DOWN", "FAIL", "FAILING")


def slurm_index_map(gpus: Sequence[GpuSample], by: str = "minor") -> dict[int, int]:
    """nvidia-smi index -> Slurm GRES index.

    slurmd sorts a node's GPUs by the number of their device file (/dev/nvidia<minor>),
    while nvidia-smi numbers them in PCI bus order; the two differ on some boards. With
    ``by="minor"`` the Slurm index is the GPU's rank by minor number (falling back to
    nvidia-smi's index when a minor number is unknown); ``by="index"`` trusts nvidia-smi.
    """
    if by == "minor" and gpus and all(g.minor is not None for g in gpus):
        ordered = sorted(gpus, key=lambda g: (g.minor, g.index))
        return {g.index: rank for rank, g in enumerate(ordered)}
    return {g.index: g.index for g in gpus}


def evaluate(observation: Observation, previous: State, config: Config) -> Decision:
    """The whole policy, without I/O. See the module docstring and README.md."""
    obs = observation
    failures: list[str] = []
    high = dict(previous.high)

    if obs.smi_timed_out:
        failures.append(f"driver did not answer within {config.timeout:g} s")
    elif obs.smi_error:
        failures.append(obs.smi_error)
    else:
        if obs.expected_gpus is not None and len(obs.gpus) < obs.expected_gpus:
            failures.append(f"only {len(obs.gpus)} of {obs.expected_gpus} GPUs visible to nvidia-smi")
        to_slurm = slurm_index_map(obs.gpus, config.slurm_index_by)
        percent = round(config.threshold * 100, 2)
        high = {}
        for gpu in sorted(obs.gpus, key=lambda g: g.index):
            fraction = gpu.fraction
            if fraction is None or fraction <= config.threshold:
                continue  # below the line (or not measurable): the run is broken, counter gone
            if obs.allocated is None:
                # Cannot tell whether a job holds it: neither count nor forget.
                count = previous.high.get(gpu.key, 0)
            elif to_slurm[gpu.index] in obs.allocated:
                count = 0  # a job holds this GPU: full memory is its right, not a leak
            else:
                count = previous.high.get(gpu.key, 0) + 1
            if count > 0:
                high[gpu.key] = count
            if count >= config.consecutive:
                leak = f"memory > {percent:g}% for {config.consecutive} checks (possible leak)"
                failures.append(f"GPU {gpu.index} {leak}")

    # A GPU that is high and free right now is not healthy enough to resume on, even below
    # the leak count (after a lost state file, a leak-drained node would otherwise flap).
    streak = 0 if failures or high else previous.healthy_streak + 1
    new_state = State(high=high, healthy_streak=streak, node=obs.node)
    drained = is_drained(obs.node_state)
    ours = is_our_reason(obs.node_reason)

    if failures:
        reason, failed = build_reason(failures), tuple(failures)
        if not obs.node_known:
            return Decision("drain", reason, new_state, failed, "node state unknown (scontrol show node failed)")
        if drained and ours and obs.node_reason.strip() == reason:
            return Decision("none", reason, new_state, failed, "already drained with this reason")
        if is_out_of_service(obs.node_state) and not ours:
            note = f"already out of service ({obs.node_state}) by someone else: {obs.node_reason or 'no reason'}"
            return Decision("none", reason, new_state, failed, note)
        return Decision("drain", reason, new_state, failed)

    if not obs.node_known:
        return Decision("none", "", new_state, (), "healthy; node state unknown")
    if drained and ours:
        if streak >= config.resume_after:
            return Decision("resume", "", new_state, (), f"healthy again, drained by us: {obs.node_reason}")
        why = "GPU memory still high" if high else f"healthy {streak}/{config.resume_after} checks"
        return Decision("none", "", new_state, (), f"{why}; not resumed yet")
    return Decision("none", "", new_state, (), "healthy")


# -------------------------------------------------------------------- parsers


def parse_nvidia_smi(stdout: str) -> list[GpuSample]:
    """Parse ``--query-gpu=index,uuid,minor_number,memory.used,memory.total --format=csv,noheader,nounits``.

    Raises ValueError on a line that does not look like that.
    """
    gpus = []
    for line in stdout.splitlines():
        if not line.strip():
            continue
        fields = [f.strip() for f in line.split(",")]
        if len(fields) != 5 or not fields[0].isdigit():
            raise ValueError(f"unexpected nvidia-smi line: {line.strip()[:80]}")
        index, uuid, minor, used, total = fields
        gpus.append(
            GpuSample(
                index=int(index),
                uuid="" if uuid.startswith("[") else uuid,
                minor=int(minor) if minor.isdigit() else None,
                used_mib=_number(used),
                total_mib=_number(total),
            )
        )
    return gpus


def _number(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None  # "[N/A]", "[Not Supported]"


def _split_top_level(text: str) -> list[str]:
    """Split on commas that are not inside parentheses."""
    parts, depth, current = [], 0, []
    for char in text:
        if char == "(":
            depth += 1
        elif char == ")":
            depth = max(0, depth - 1)
        if char == "," and depth == 0:
            parts.append("".join(current))
            current = []
        else:
            current.append(char)
    parts.append("".join(current))
    return [p.strip() for p in parts if p.strip() and p.strip() != "(null)"]


def parse_index_list(text: str) -> set[int]:
    """``"0-1,3"`` -> {0, 1, 3}; ``"N/A"`` -> set()."""
    result: set[int] = set()
    for part in text.split(","):
        part = part.strip()
        if re.fullmatch(r"\d+", part):
            result.add(int(part))
        elif re.fullmatch(r"\d+-\d+", part):
            low, high = (int(x) for x in part.split("-"))
            result.update(range(low, high + 1))
    return result


def gpu_count_from_gres(gres: str) -> int | None:
    """``Gres=gpu:a100:4,shard:a100:40`` -> 4; no gpu entry -> None."""
    total, seen = 0, False
    for entry in _split_top_level(gres):
        spec = entry.split("(", 1)[0]
        parts = spec.split(":")
        if parts[0] != "gpu":
            continue
        seen = True
        last = parts[-1] if len(parts) > 1 else "1"
        total += int(last) if last.isdigit() else 1
    return total if seen else None


def allocated_from_gres_used(gres_used: str) -> frozenset[int] | None:
    """Slurm GRES indexes of GPUs that a job holds, from ``scontrol -d show node``'s GresUsed.

    ``gpu:a100:2(IDX:0-1),shard:a100:3(0/10,0/10,3/10,0/10)`` -> {0, 1, 2}: whole-GPU jobs
    through IDX, shard/MPS jobs through their per-GPU counts (position = GRES index).
    Returns None when the text cannot be read (the caller then counts nothing as a leak).
    """
    held: set[int] = set()
    for entry in _split_top_level(gres_used):
        spec, _, detail = entry.partition("(")
        detail = detail.rstrip(")")
        parts = spec.split(":")
        name = parts[0]
        count_text = parts[-1] if len(parts) > 1 else "0"
        if not count_text.isdigit():
            return None
        if int(count_text) == 0:
            continue
        if name == "gpu":
            if not detail.startswith("IDX:"):
                return None
            held |= parse_index_list(detail[4:])
        else:  # shard, mps: "(used/total,used/total,...)" per GPU
            per_gpu = [c.strip() for c in detail.split(",")] if detail else []
            if not per_gpu or not all(re.fullmatch(r"\d+/\d+", c) for c in per_gpu):
                return None
            held |= {i for i, c in enumerate(per_gpu) if int(c.split("/")[0]) > 0}
    return frozenset(held)


def parse_scontrol_node(text: str) -> dict[str, str]:
    """``scontrol -d show node NAME`` -> {"State": ..., "Gres": ..., "GresUsed": ..., "Reason": ...}.

    Reason, Comment, Extra and OS hold spaces and run to the end of their line, so they
    are taken whole (a Comment containing "Reason=" cannot fool the parser).
    """
    fields: dict[str, str] = {}
    for line in text.splitlines():
        stripped = line.strip()
        match = re.match(r"^(Reason|Comment|Extra|OS)=(.*)$", stripped)
        if match:
            fields.setdefault(match.group(1), match.group(2).strip())
            continue
        for token in stripped.split():
            key, sep, value = token.partition("=")
            if sep and key and key not in fields:
                fields[key] = value
    if "Reason" in fields:
        fields["Reason"] = REASON_STAMP_RE.sub("", fields["Reason"]).strip()
    return fields


# ------------------------------------------------------------------------- I/O


@dataclass(frozen=True)
class CommandResult:
    returncode: int | None  # None: it did not finish
    stdout: str = ""
    stderr: str = ""
    timed_out: bool = False
    missing: bool = False  # the binary does not exist or cannot be executed
    error: str = ""


Runner = Callable[[Sequence[str], float], CommandResult]


def run_command(argv: Sequence[str], timeout: float) -> CommandResult:
    """Run argv (never a shell), give up after ``timeout`` seconds.

    A driver hang leaves nvidia-smi in uninterruptible sleep, where even SIGKILL waits;
    ``subprocess.run`` would then block forever in wait(). So the child gets its own
    process group, the group is killed on timeout, and if it still has not exited one
    second later it is abandoned: the health check must finish, whatever the driver does.
    """
    try:
        proc = subprocess.Popen(
            list(argv),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            errors="replace",
            start_new_session=True,
        )
    except (FileNotFoundError, PermissionError, NotADirectoryError) as exc:
        return CommandResult(None, missing=True, error=f"{argv[0]}: {exc.strerror or exc}")
    except OSError as exc:
        return CommandResult(None, error=f"{argv[0]}: {exc}")
    try:
        stdout, stderr = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except OSError:
            pass
        try:
            proc.communicate(timeout=1.0)
        except subprocess.TimeoutExpired:
            pass  # stuck in the kernel: leave it to init
        return CommandResult(None, timed_out=True, error=f"{argv[0]}: no answer within {timeout:g} s")
    return CommandResult(proc.returncode, stdout or "", stderr or "")


def resolve_binary(name: str) -> str:
    """An absolute path stays as given; a bare name is looked up in PATH, then in FALLBACK_PATH."""
    if os.sep in name:
        return name
    search = os.pathsep.join(p for p in (os.environ.get("PATH", ""), FALLBACK_PATH) if p)
    return shutil.which(name, path=search) or name


def _first_line(*texts: str) -> str:
    for text in texts:
        for line in text.splitlines():
            if line.strip():
                return line.strip()
    return ""


def observe(node: str, args: argparse.Namespace, runner: Runner) -> Observation:
    smi = runner(
        [args.nvidia_smi, f"--query-gpu={NVIDIA_SMI_QUERY}", "--format=csv,noheader,nounits"],
        args.timeout,
    )
    gpus: tuple[GpuSample, ...] = ()
    smi_error = ""
    if smi.timed_out:
        pass
    elif smi.missing:
        smi_error = f"nvidia-smi not found or not executable ({args.nvidia_smi})"
    elif smi.returncode != 0:
        message = _first_line(smi.stdout, smi.stderr, smi.error) or "no message"
        smi_error = f"nvidia-smi failed (exit {smi.returncode}): {message}"
    else:
        try:
            gpus = tuple(parse_nvidia_smi(smi.stdout))
        except ValueError as exc:
            smi_error = f"nvidia-smi output unreadable: {exc}"

    show = runner([args.scontrol, "-d", "show", "node", node], SCONTROL_TIMEOUT)
    fields: dict[str, str] = {}
    if show.returncode == 0 and "NodeName=" in show.stdout:
        fields = parse_scontrol_node(show.stdout)
    node_known = bool(fields)

    expected = args.expect_gpus
    if expected is None and node_known:
        expected = gpu_count_from_gres(fields.get("Gres", ""))
    allocated = allocated_from_gres_used(fields["GresUsed"]) if "GresUsed" in fields else None

    return Observation(
        node=node,
        gpus=gpus,
        smi_timed_out=smi.timed_out,
        smi_error=smi_error,
        expected_gpus=expected,
        node_known=node_known,
        node_state=fields.get("State", ""),
        node_reason=fields.get("Reason", "") if fields.get("Reason") not in ("None", "(null)") else "",
        allocated=allocated,
    )


def load_state(path: str, node: str) -> State:
    try:
        with open(path, encoding="utf-8") as handle:
            return State.from_json(handle.read(), node=node)
    except (OSError, UnicodeDecodeError):
        return State(node=node)


def save_state(path: str, state: State) -> None:
    """Write atomically: a crash mid-write leaves the old file, never half a file."""
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, mode=0o755, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".state-", suffix=".tmp", dir=directory)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(state.to_json() + "\n")
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def update_command(scontrol: str, node: str, decision: Decision) -> list[str]:
    if decision.action == "drain":
        return [scontrol, "update", f"NodeName={node}", "State=DRAIN", f"Reason={decision.reason}"]
    if decision.action == "resume":
        return [scontrol, "update", f"NodeName={node}", "State=RESUME"]
    return []


def log(message: str, *, use_syslog: bool, error: bool = False) -> None:
    print(f"gpu_healthcheck: {message}", file=sys.stderr, flush=True)
    if use_syslog and syslog is not None:
        try:
            syslog.openlog("gpu_healthcheck", syslog.LOG_PID, syslog.LOG_DAEMON)
            syslog.syslog(syslog.LOG_ERR if error else syslog.LOG_INFO, message)
        except OSError:
            pass


def describe(obs: Observation, decision: Decision) -> str:
    gpus = f"{len(obs.gpus)}/{obs.expected_gpus if obs.expected_gpus is not None else '?'}"
    held = "?" if obs.allocated is None else (",".join(map(str, sorted(obs.allocated))) or "-")
    parts = [
        f"node={obs.node}",
        f"action={decision.action}",
        f"gpus={gpus}",
        f"held={held}",
        f"state={obs.node_state or '?'}",
    ]
    if decision.reason:
        parts.append(f'reason="{decision.reason}"')
    if decision.note:
        parts.append(f'note="{sanitize_reason(decision.note, 300)}"')
    return " ".join(parts)


# ------------------------------------------------------------------------- CLI


def default_node() -> str:
    return os.environ.get("SLURMD_NODENAME") or socket.gethostname().split(".")[0]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        description="GPU health check for Slurm's HealthCheckProgram: drain failing nodes, resume our own drains.",
    )
    parser.add_argument("--node", default=None, help="Slurm node name (default: $SLURMD_NODENAME, else hostname)")
    parser.add_argument("--expect-gpus", type=int, default=None, help="GPUs the node must show (default: its Gres)")
    parser.add_argument("--timeout", type=float, default=5.0, help="seconds nvidia-smi may take (default 5)")
    parser.add_argument("--threshold", type=float, default=0.95, help="memory used fraction counted high (0.95)")
    parser.add_argument("--consecutive", type=int, default=3, help="high checks in a row that make a leak (3)")
    parser.add_argument("--resume-after", type=int, default=1, help="healthy checks before our drain is resumed (1)")
    parser.add_argument("--state-file", default=DEFAULT_STATE_FILE, help=f"per-node state ({DEFAULT_STATE_FILE})")
    parser.add_argument("--dry-run", action="store_true", help="print the decision as JSON; change nothing")
    parser.add_argument("--scontrol", default="scontrol", help="scontrol binary (default: found in PATH)")
    parser.add_argument("--nvidia-smi", default="nvidia-smi", help="nvidia-smi binary (default: found in PATH)")
    parser.add_argument(
        "--slurm-index-by",
        choices=("minor", "index"),
        default="minor",
        help="map Slurm's GRES index to a GPU by device minor number (default) or by nvidia-smi index",
    )
    parser.add_argument("--no-syslog", action="store_true", help="log to stderr only")
    return parser


def _validate(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    if args.timeout <= 0:
        parser.error("--timeout must be > 0")
    if not 0 < args.threshold < 1:
        parser.error("--threshold must be between 0 and 1")
    if args.consecutive < 1 or args.resume_after < 1:
        parser.error("--consecutive and --resume-after must be >= 1")
    if args.expect_gpus is not None and args.expect_gpus < 0:
        parser.error("--expect-gpus must be >= 0")


def main(argv: Sequence[str] | None = None, runner: Runner = run_command) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    _validate(parser, args)
    use_syslog = not (args.no_syslog or args.dry_run)
    node = args.node or default_node()
    if not NODE_NAME_RE.match(node):
        log(f"refusing odd node name {node!r}", use_syslog=use_syslog, error=True)
        return 0
    args.scontrol = resolve_binary(args.scontrol)
    args.nvidia_smi = resolve_binary(args.nvidia_smi)
    config = Config(
        timeout=args.timeout,
        threshold=args.threshold,
        consecutive=args.consecutive,
        resume_after=args.resume_after,
        slurm_index_by=args.slurm_index_by,
    )
    try:
        return _run(node, args, config, runner, use_syslog)
    except Exception as exc:  # slurmd only needs us to finish; say what broke and exit 0
        log(f"node={node} internal error: {type(exc).__name__}: {exc}", use_syslog=use_syslog, error=True)
        return 0


def _run(node: str, args: argparse.Namespace, config: Config, runner: Runner, use_syslog: bool) -> int:
    lock = None
    if not args.dry_run and fcntl is not None:
        try:
            os.makedirs(os.path.dirname(os.path.abspath(args.state_file)), mode=0o755, exist_ok=True)
            lock = open(args.state_file + ".lock", "a")  # held (and flocked) for the whole run
        except OSError as exc:  # an unwritable /var/lib must not stop the driver check
            log(f"node={node} cannot lock {args.state_file}.lock: {exc}", use_syslog=use_syslog, error=True)
        if lock is not None:
            try:
                fcntl.flock(lock.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                log(f"node={node} previous check still running (hung driver?); skipped", use_syslog=use_syslog)
                lock.close()
                return 0
    try:
        previous = load_state(args.state_file, node)
        obs = observe(node, args, runner)
        decision = evaluate(obs, previous, config)
        command = update_command(args.scontrol, node, decision)
        log(describe(obs, decision), use_syslog=use_syslog, error=decision.action == "drain")
        if args.dry_run:
            print(
                json.dumps(
                    {
                        "node": node,
                        "action": decision.action,
                        "reason": decision.reason,
                        "failures": list(decision.failures),
                        "note": decision.note,
                        "command": command,
                        "new_state": asdict(decision.new_state),
                    },
                    sort_keys=True,
                )
            )
            return 0
        try:
            save_state(args.state_file, decision.new_state)
        except OSError as exc:  # the drain matters more than the counters
            log(f"node={node} cannot write {args.state_file}: {exc}", use_syslog=use_syslog, error=True)
        if command:
            result = runner(command, SCONTROL_TIMEOUT)
            if result.returncode != 0:
                why = _first_line(result.stderr, result.stdout, result.error) or "no message"
                log(f"node={node} scontrol update failed: {why}", use_syslog=use_syslog, error=True)
        return 0
    finally:
        if lock is not None:
            lock.close()


if __name__ == "__main__":
    sys.exit(main())
