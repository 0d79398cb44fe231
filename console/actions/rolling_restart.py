"""A rolling restart: the nodes an admin picks are restarted one at a time, each once its jobs have
ended, while every other node keeps running its jobs.

Slurm does the node's part (`scontrol reboot ASAP nextstate=RESUME`): it drains the node so no new
job lands there, waits for the running ones to end, runs RebootProgram (a real site's reboot; the dev
cluster's restarts the node's slurmd as a boot, deploy/devcluster/power/gpupool-node-reboot) and
resumes the node once it has booted. The portal asks for one node at a time and follows it: a step is
done when Slurm reports a boot later than the asking and the node back in service. When the last node
is back, a canary runs on the restarted nodes (console/actions/canary.py). A canary-first restart (the
article's beta partition of a tenth of the nodes) restarts a tenth first, runs the canary on them, and
asks the rest only once it passed.

`advance` is the one pass, run by the beat and once at the start; every change of a step or of the
restart is a conditional UPDATE from the state the pass read, so two passes side by side ask Slurm
nothing twice. A pass that dies between its claim and Slurm's answer is healed by the next: a
draining step whose node shows no reboot request and no new boot is asked again.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import timedelta

from django.db import IntegrityError, transaction
from django.db.models import Q
from django.utils import timezone

from audit.log import record
from cluster.clusters.services import rest_client, slurm_cli
from cluster.commands.cli import slurm_reason
from cluster.errors import SlurmError
from cluster.models import Node
from console.actions import canary
from console.models import CanaryCheck, CanaryRun, RollingRestart, RollingRestartStep

log = logging.getLogger(__name__)

# Longer than Slurm's own ResumeTimeout (after which it marks a node that did not come back DOWN),
# so Slurm's verdict, with its reason, comes first.
RESTART_DEADLINE = timedelta(minutes=10)
# Slurm's boot time is whole seconds; the asking is not.
_CLOCK = timedelta(seconds=1)
_REBOOT_FLAGS = {"REBOOT_REQUESTED", "REBOOT_ISSUED"}
Step = RollingRestartStep.State


class RollingRestartError(ValueError):
    """A request that cannot be done, in words for the admin; nothing was changed. `field` and
    `status` are what the API answers (409: the state of a restart stands in the way)."""

    def __init__(self, message: str, *, field: str = "nodes", status: int = 400):
        super().__init__(message)
        self.message, self.field, self.status = message, field, status


@dataclass(frozen=True)
class NodeNow:
    """A node as Slurm says it this moment (not the mirror's copy of up to a pass ago)."""

    states: frozenset[str]
    reason: str
    boot_time: object

    @property
    def rebooting(self) -> bool:
        return bool(self.states & _REBOOT_FLAGS)

    @property
    def in_service(self) -> bool:
        return not self.rebooting and not self.states & {"DOWN", "DRAIN", "NOT_RESPONDING", "FAIL"}


def first_tenth(count: int) -> int:
    """How many nodes a canary-first restart restarts before its canary: a tenth, one at least."""
    return max(1, -(-count // 10))


def start(actor, nodes: list[str], reason: str, *, canary_first: bool = False) -> RollingRestart:
    """A restart of `nodes`, in the order given; refused while another runs. The caller enqueues
    its first pass (console.tasks.advance_rolling_restart) on commit, or the beat's finds it."""
    reason = " ".join(reason.split())[:200]
    if not reason:
        raise RollingRestartError(
            "Say why the nodes restart (it is the reason Slurm shows while each drains).", field="reason"
        )
    chosen = list(dict.fromkeys(nodes))
    if not chosen:
        raise RollingRestartError("Tick the nodes to restart.")
    known = set(Node.objects.filter(name__in=chosen).values_list("name", flat=True))
    unknown = [name for name in chosen if name not in known]
    if unknown:
        raise RollingRestartError(f"Slurm has no node named {', '.join(unknown)}.")
    try:
        with transaction.atomic():
            restart = RollingRestart.objects.create(reason=reason, started_by=actor, canary_first=canary_first)
            RollingRestartStep.objects.bulk_create(
                RollingRestartStep(restart=restart, node=node, position=index) for index, node in enumerate(chosen)
            )
            record(
                actor,
                "rolling_restart.start",
                f"rolling restart {restart.pk}",
                after={"nodes": chosen, "canary_first": canary_first},
                reason=reason,
            )
    except IntegrityError:
        raise RollingRestartError(
            "A rolling restart is running already; stop it or wait for its end.", status=409
        ) from None
    return restart


def stop(actor, restart_pk: int) -> RollingRestart:
    """No further node is asked. The node draining now gets its reboot withdrawn (Slurm lifts the
    drain); a node already restarting finishes, and the passes follow it back."""
    if not RollingRestart.objects.filter(pk=restart_pk, state=RollingRestart.State.RUNNING).update(
        state=RollingRestart.State.STOPPED, detail=f"Stopped by {getattr(actor, 'username', 'the system')}."
    ):
        raise RollingRestartError("That rolling restart is not running.", field="id", status=409)
    restart = RollingRestart.objects.get(pk=restart_pk)
    RollingRestartStep.objects.filter(restart=restart, state=Step.WAITING).update(state=Step.SKIPPED)
    for step in RollingRestartStep.objects.filter(restart=restart, state=Step.DRAINING):
        try:
            slurm_cli().cancel_reboot(step.node)
        except SlurmError as exc:
            # Slurm issued the reboot in between: the step is followed to its end like a restarting one.
            log.info("rolling restart %s: cancel_reboot %s: %s", restart.pk, step.node, exc.message)
            continue
        RollingRestartStep.objects.filter(pk=step.pk, state=Step.DRAINING).update(
            state=Step.SKIPPED, detail="Its restart was withdrawn before it began; the node is back for jobs."
        )
    record(actor, "rolling_restart.stop", f"rolling restart {restart.pk}")
    _finish_if_settled(restart)
    return RollingRestart.objects.get(pk=restart_pk)


def unfinished() -> list[int]:
    """Restarts a pass has work for: running ones, and stopped ones still following a node back."""
    following = RollingRestartStep.objects.filter(state__in=[Step.DRAINING, Step.RESTARTING]).values("restart")
    return list(
        RollingRestart.objects.filter(
            Q(state=RollingRestart.State.RUNNING) | Q(pk__in=following, finished_at=None)
        ).values_list("pk", flat=True)
    )


def advance(restart_pk: int, now=None) -> str:
    """One pass: follow the node in its turn; ask the next when it is back; end the restart after the last."""
    now = now or timezone.now()
    restart = RollingRestart.objects.select_related("started_by").get(pk=restart_pk)
    active = list(restart.steps.filter(state__in=[Step.DRAINING, Step.RESTARTING]))
    if active:
        try:
            nodes = _nodes_now()
        except SlurmError as exc:
            log.info("rolling restart %s: Slurm unreachable (%s); the next pass tries again", restart.pk, exc)
            return restart.state
        for step in active:
            _follow(restart, step, nodes.get(step.node), now)
    restart.refresh_from_db()
    if (
        restart.state == RollingRestart.State.RUNNING
        and not restart.steps.filter(state__in=[Step.DRAINING, Step.RESTARTING]).exists()
    ):
        following = restart.steps.filter(state=Step.WAITING).first()
        if following is not None and _gate_open(restart):
            _ask(restart, following, timezone.now())  # the moment Slurm is asked, after the gate
    _finish_if_settled(restart)
    return RollingRestart.objects.get(pk=restart_pk).state


def _gate_open(restart: RollingRestart) -> bool:
    """Whether the rest may be asked: always, or for a canary-first restart once its first tenth is
    back and the canary on them passed. Starts that canary when the first tenth is back; a canary
    that fails there stops the restart (the failing node is drained by the canary itself)."""
    if not restart.canary_first:
        return True
    done = list(restart.steps.filter(state=Step.DONE).values_list("node", flat=True))
    if len(done) < first_tenth(restart.steps.count()):
        return True
    if restart.gate_id is None:
        try:
            run = canary.start(
                restart.started_by, CanaryRun.Trigger.ROLLING_RESTART, f"First tenth of: {restart.reason}", nodes=done
            )
        except canary.CanaryRefused as exc:
            _stop_failed(restart, f"The canary after the first tenth could not run: {exc}")
            return False
        if not RollingRestart.objects.filter(pk=restart.pk, gate=None).update(gate=run):
            run.delete()  # a pass beside this one started it
        return False
    canary.settle()  # as the beat does: the verdicts of checks whose jobs ended
    checks = list(CanaryCheck.objects.filter(run_id=restart.gate_id))
    if any(check.state == CanaryCheck.State.RUNNING for check in checks):
        return False
    failed = [check for check in checks if check.state == CanaryCheck.State.FAILED]
    if failed or not checks:
        why = "; ".join(f"{check.node}: {check.detail}" for check in failed) or "no node could take its job"
        _stop_failed(restart, f"The canary on the first tenth failed ({why}); the rest were not restarted.")
        return False
    return True


def _stop_failed(restart: RollingRestart, words: str) -> None:
    RollingRestartStep.objects.filter(restart=restart, state=Step.WAITING).update(state=Step.SKIPPED)
    RollingRestart.objects.filter(pk=restart.pk, state=RollingRestart.State.RUNNING).update(
        state=RollingRestart.State.FAILED, detail=words[:500]
    )


def _nodes_now() -> dict[str, NodeNow]:
    return {
        node.name: NodeNow(frozenset(node.states), node.reason, node.boot_time) for node in rest_client().list_nodes()
    }


def _ask(restart: RollingRestart, step: RollingRestartStep, now) -> None:
    # Claimed before Slurm is asked: a pass beside this one asks nothing.
    if not RollingRestartStep.objects.filter(pk=step.pk, state=Step.WAITING).update(state=Step.DRAINING, asked_at=now):
        return
    _ask_slurm(restart, step)


def _ask_slurm(restart: RollingRestart, step: RollingRestartStep) -> None:
    try:
        slurm_cli().reboot_node(step.node, slurm_reason(f"rolling restart {restart.pk}: {restart.reason}"))
    except (SlurmError, ValueError) as exc:
        if isinstance(exc, SlurmError) and exc.transient:
            # slurmctld away for a moment: the step stays claimed and the next pass asks again
            # (no reboot request on the node, no new boot).
            log.info("rolling restart %s: reboot %s not asked yet: %s", restart.pk, step.node, exc)
            return
        words = exc.public_message if isinstance(exc, SlurmError) else str(exc)
        log.warning("rolling restart %s: reboot %s refused: %s", restart.pk, step.node, exc)
        _fail(restart, step, f"Slurm did not take the restart: {words}")


def _follow(restart: RollingRestart, step: RollingRestartStep, node: NodeNow | None, now) -> None:
    if node is None:
        _fail(restart, step, "Slurm no longer lists this node.")
        return
    booted = node.boot_time is not None and node.boot_time >= step.asked_at - _CLOCK
    if booted and node.in_service:
        RollingRestartStep.objects.filter(pk=step.pk, state=step.state).update(
            state=Step.DONE, done_at=now, detail=f"Back after {_took(step.asked_at, now)}."
        )
        return
    if "DOWN" in node.states and not node.rebooting:
        # Slurm gave up on it (ResumeTimeout) or it failed on the way back: it stays down, with Slurm's reason.
        _fail(restart, step, f"The node did not come back: Slurm marked it down ({node.reason or 'no reason given'}).")
        return
    if "REBOOT_ISSUED" in node.states and step.state == Step.DRAINING:
        RollingRestartStep.objects.filter(pk=step.pk, state=Step.DRAINING).update(
            state=Step.RESTARTING, restarting_since=now
        )
        return
    if step.state == Step.RESTARTING and now - (step.restarting_since or step.asked_at) > RESTART_DEADLINE:
        _fail(restart, step, f"The node was not back within {int(RESTART_DEADLINE.total_seconds() // 60)} minutes.")
        return
    if (
        step.state == Step.DRAINING
        and not node.rebooting
        and not booted
        and restart.state == RollingRestart.State.RUNNING
    ):
        # The request never reached Slurm (the pass that claimed the step died first): ask again.
        _ask_slurm(restart, step)


def _fail(restart: RollingRestart, step: RollingRestartStep, words: str) -> None:
    if not RollingRestartStep.objects.filter(pk=step.pk, state__in=[Step.DRAINING, Step.RESTARTING]).update(
        state=Step.FAILED, detail=words[:500]
    ):
        return
    _stop_failed(restart, f"{step.node}: {words}")


def _took(since, now) -> str:
    seconds = max(0, int((now - since).total_seconds()))
    return f"{seconds} s" if seconds < 120 else f"{seconds // 60} min"


def _finish_if_settled(restart: RollingRestart) -> None:
    """The end, once no step is waiting or being followed; a canary on the nodes restarted."""
    if restart.steps.filter(state__in=[Step.WAITING, Step.DRAINING, Step.RESTARTING]).exists():
        return
    now = timezone.now()
    ended = RollingRestart.objects.filter(pk=restart.pk, finished_at=None)
    if not ended.filter(state=RollingRestart.State.RUNNING).update(state=RollingRestart.State.DONE, finished_at=now):
        if not ended.update(finished_at=now):
            return  # another pass ended it
    restart.refresh_from_db()
    restarted = list(restart.steps.filter(state=Step.DONE).values_list("node", flat=True))
    record(
        None,
        "rolling_restart.end",
        f"rolling restart {restart.pk}",
        after={"state": restart.state, "restarted": restarted},
    )
    if not restarted:
        return
    try:
        run = canary.start(
            restart.started_by, CanaryRun.Trigger.ROLLING_RESTART, f"After: {restart.reason}", nodes=restarted
        )
    except canary.CanaryRefused as exc:
        RollingRestart.objects.filter(pk=restart.pk).update(detail=f"No canary: {exc}"[:500])
        return
    RollingRestart.objects.filter(pk=restart.pk).update(canary=run)


def latest() -> RollingRestart | None:
    return RollingRestart.objects.prefetch_related("steps").select_related("canary").first()
