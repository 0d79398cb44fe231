"""The canary after a change: on every node that Slurm offers (or a window's nodes), a short job pinned to
the node starts a container of CANARY_IMAGE in the pool's runtime (JOB_RUNTIME: Pyxis and Enroot, as
users' jobs run) and checks the GPU Slurm gave it (nvidia-smi -L where the image has it; the dev
cluster's emulated GPUs have none, and the check is then Slurm's allocation alone, said so in the log).
A node whose check fails is drained with the reason, so no user's job lands on it; the admin reads the
reason on the maintenance page and resumes the node once it is fixed.

It runs after a maintenance window ends (`start_after_windows`, the beat), after a rolling restart
(console/actions/rolling_restart.py), after slurmctld restarts (`start_after_slurmctld_restart`, the
beat: its BOOT_TIME is new), after an image is prewarmed on the nodes (in that image, on the nodes that
took it: console/actions/image_operations.py), or when an admin asks. The
jobs are operational jobs of the admin who planned the window or asked (jobs.actions.create_pinned_job),
submitted like any job; `settle` reads each ended job's log. Every change of a check is a conditional
UPDATE from `running`, so two passes never drain a node twice.
"""

from __future__ import annotations

import logging
from datetime import timedelta

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import IntegrityError, transaction
from django.utils import timezone

from accounts.models import Profile, Role
from cluster.clusters.services import slurm_cli
from cluster.commands.cli import slurm_reason
from cluster.errors import SlurmError
from cluster.models import Node
from console.actions.node_actions import drain
from console.actions.pinned_jobs import submit_pinned_job
from console.models import CanaryCheck, CanaryRun, MaintenanceWindow, SlurmctldStart
from jobs import actions as job_actions
from jobs.logs import local_log_path, read_tail
from jobs.models import JobState
from jobs.submission.batch_script import pyxis_image_reference
from jobs.submission.spec import IMAGE_RE

User = get_user_model()
log = logging.getLogger(__name__)
PASS = "GPUPOOL_CANARY_PASS"
FAIL = "GPUPOOL_CANARY_FAIL"
MINUTES = 5  # the job's time limit: a container start on a cold node is a minute or two
GIVE_UP_AFTER = timedelta(minutes=30)  # a check whose job never ends (the node never took it)
# Windows that ended longer ago than this get no canary when the beat first sees them (a new install).
LATE = timedelta(hours=6)

_CONTAINER = {
    "pyxis": (
        "if ! srun --ntasks=1 --container-image='{image}' bash -c 'echo GPUPOOL_CANARY container started; "
        "if command -v nvidia-smi >/dev/null 2>&1; then nvidia-smi -L || exit 5; "
        "else echo GPUPOOL_CANARY no nvidia-smi in the image: the GPU check is the allocation; fi'; then\n"
        '  echo "' + FAIL + ' the container did not start, or its GPU check failed (Pyxis and Enroot)"\n'
        "  exit 4\n"
        "fi"
    ),
    "none": 'echo "GPUPOOL_CANARY no container runtime here (JOB_RUNTIME=none): the node\'s own shell ran it"',
}
SCRIPT = (
    "#!/bin/bash\n"
    'echo "GPUPOOL_CANARY node=$(hostname) gpus=${{CUDA_VISIBLE_DEVICES:-none}}"\n'
    'if [ -z "${{CUDA_VISIBLE_DEVICES:-}}" ]; then echo "' + FAIL + ' Slurm gave the job no GPU"; exit 3; fi\n'
    "{container}\n"
    'echo "' + PASS + '"\n'
)


class CanaryRefused(ValueError):
    pass


def canary_script(image: str, runtime: str) -> str:
    """The job's script. The image is a setting, checked against the image grammar before it is written."""
    if not IMAGE_RE.fullmatch(image):
        raise CanaryRefused(f"CANARY_IMAGE is not an image reference: {image!r}")
    container = _CONTAINER[runtime].replace("{image}", pyxis_image_reference(image))
    return SCRIPT.format(container=container)


def _new_run(actor, trigger: str, reason: str, image: str | None = None) -> CanaryRun:
    image = image or settings.CANARY_IMAGE
    canary_script(image, settings.JOB_RUNTIME)  # a bad image refuses before anything is made
    if actor is None or not Profile.objects.filter(user=actor).exclude(cluster_username="").exists():
        raise CanaryRefused("The canary runs as an admin with a cluster account; nobody is given.")
    return CanaryRun.objects.create(trigger=trigger, reason=reason[:300], image=image, started_by=actor)


def start(actor, trigger: str, reason: str = "", nodes: list[str] | None = None, image: str | None = None) -> CanaryRun:
    """A run with a check per node (every node Slurm offers, or `nodes`), each job submitted now, in
    `image` (CANARY_IMAGE by default)."""
    run = _new_run(actor, trigger, reason, image)
    _submit_checks(run, nodes)
    return run


def _submit_checks(run: CanaryRun, nodes: list[str] | None) -> None:
    """A node Slurm refuses the job for is failed with Slurm's words, not drained (the node is not at fault)."""
    script = canary_script(run.image, settings.JOB_RUNTIME)
    actor = run.started_by
    for node in Node.objects.order_by("name"):
        if nodes and node.name not in nodes:
            continue
        if node.is_unavailable or not node.gpu_type:
            continue  # Slurm would hold its job forever: it is down or drained already
        check = CanaryCheck.objects.create(run=run, node=node.name)
        try:
            job = submit_pinned_job(
                actor,
                name=f"canary-{node.name}",
                script=script,
                node=node.name,
                tres_per_node=f"gres/gpu:{node.gpu_type}:1",
                minutes=MINUTES,
            )
        except (SlurmError, job_actions.NotProvisioned) as exc:
            words = getattr(exc, "public_message", str(exc))
            CanaryCheck.objects.filter(pk=check.pk).update(
                state=CanaryCheck.State.FAILED, detail=f"Not submitted: {words}"[:500], finished_at=timezone.now()
            )
            continue
        CanaryCheck.objects.filter(pk=check.pk).update(job=job)


def _verdict(check: CanaryCheck) -> tuple[str, str]:
    job = check.job
    text = read_tail(local_log_path(job.standard_output, job.cluster_user), 32 * 1024).text
    if job.state == JobState.COMPLETED and PASS in text:
        return CanaryCheck.State.PASSED, ""
    for line in text.splitlines():
        if line.startswith(FAIL):
            return CanaryCheck.State.FAILED, line[len(FAIL) :].strip().capitalize()
    return CanaryCheck.State.FAILED, f"The job ended {job.get_state_display().lower()} before its checks finished."


def settle(now=None) -> int:
    """Each running check whose job ended gets its verdict; a failed node is drained. Returns the checks settled."""
    now = now or timezone.now()
    settled = 0
    for check in CanaryCheck.objects.filter(state=CanaryCheck.State.RUNNING).select_related("job", "run__started_by"):
        if check.job is None or not check.job.is_final:
            if now - check.run.started_at > GIVE_UP_AFTER:
                state, detail = CanaryCheck.State.FAILED, "Its job did not end within 30 minutes."
                if check.job is not None:
                    job_actions.cancel(check.job)
            else:
                continue
        else:
            state, detail = _verdict(check)
        if not CanaryCheck.objects.filter(pk=check.pk, state=CanaryCheck.State.RUNNING).update(
            state=state, detail=detail[:500], finished_at=now
        ):
            continue  # another pass settled it
        settled += 1
        if state == CanaryCheck.State.FAILED and check.job is not None and check.job.is_final:
            reason = slurm_reason(f"canary {check.run_id} failed: {detail}")
            entry = drain(check.run.started_by, check.node, reason)
            if entry.succeeded:
                CanaryCheck.objects.filter(pk=check.pk).update(drained=True)
    return settled


def start_after_windows(now=None) -> int:
    """A canary for each window that has just ended, once (the window's `canary`, set by a conditional UPDATE)."""
    now = now or timezone.now()
    started = 0
    ended = MaintenanceWindow.objects.filter(
        state=MaintenanceWindow.State.PLANNED, canary__isnull=True, end__lte=now, end__gt=now - LATE
    )
    for window in ended.select_related("created_by__profile"):
        try:
            run = _new_run(window.created_by, CanaryRun.Trigger.WINDOW_ENDED, f"After: {window.reason}")
        except CanaryRefused:
            continue
        # Claimed before a job is submitted: a pass beside this one, or the next, submits nothing twice.
        if not MaintenanceWindow.objects.filter(pk=window.pk, canary=None).update(canary=run):
            run.delete()
            continue
        _submit_checks(run, window.nodes)
        started += 1
    return started


def start_after_slurmctld_restart() -> int:
    """A canary on every node when slurmctld's start time is new (an upgrade restarts it; the
    article's warning is every Pyxis job failing after one). The first start ever seen is only
    recorded: a new install changed nothing. Runs as the first admin with a cluster account."""
    try:
        booted = slurm_cli().slurmctld_boot_time()
    except SlurmError as exc:
        log.info("canary: slurmctld's start time unread (%s); the next pass reads it", exc)
        return 0
    if SlurmctldStart.objects.filter(started_at=booted).exists():
        return 0
    known_before = SlurmctldStart.objects.exists()
    try:
        with transaction.atomic():
            seen = SlurmctldStart.objects.create(started_at=booted)
    except IntegrityError:
        return 0  # a pass beside this one recorded it
    if not known_before:
        return 0
    operator = (
        User.objects.filter(profile__role=Role.ADMIN, is_active=True)
        .exclude(profile__cluster_username="")
        .order_by("pk")
        .first()
    )
    try:
        run = _new_run(operator, CanaryRun.Trigger.SLURMCTLD_RESTART, f"slurmctld started {booted:%Y-%m-%d %H:%M} UTC")
    except CanaryRefused as exc:
        log.warning("canary after slurmctld's restart not run: %s", exc)
        return 0
    SlurmctldStart.objects.filter(pk=seen.pk).update(canary=run)
    _submit_checks(run, None)
    return 1


def latest() -> CanaryRun | None:
    return CanaryRun.objects.prefetch_related("checks").first()
