"""Idle culling's rules (interactive/actions/culling.py) with the clock as a parameter: a server that
answers /api/kernels as Jupyter does (tests/upstream.py), GPU samples in the telemetry store."""

from datetime import timedelta

import pytest
from django.core import mail
from django.utils import timezone

from interactive.actions.culling import cull_idle_sessions, emulated_idle_sessions
from interactive.models import InteractiveSession
from interactive.tests.upstream import upstream_server
from jobs.models import Job, JobState
from telemetry.models import GpuSampleRaw

pytestmark = pytest.mark.django_db(transaction=True)


def _ready_session(owner, port: int, ready_at) -> InteractiveSession:
    job = Job.objects.create(
        owner=owner, state=JobState.RUNNING, name="lab", nodes="gpu-4090-01", gpu_allocation={"gpu-4090-01": [1]}
    )
    return InteractiveSession.objects.create(
        job=job, owner=owner, kind="jupyterlab", address="127.0.0.1", port=port, ready_at=ready_at
    )


def _kernel(at, state="idle"):
    return {"id": "k", "name": "python3", "last_activity": at.isoformat(), "execution_state": state}


def test_idle_for_the_plans_minutes_is_warned_once_then_stopped_unless_used(alice, settings):
    settings.SESSION_IDLE_WARNING_SECONDS = 300
    start = timezone.now()
    with upstream_server() as (port, _ws, server):
        session = _ready_session(alice, port, start)
        server.kernels = [_kernel(start + timedelta(minutes=5))]
        # 34 minutes: the kernel's last message was 29 minutes ago. Nothing yet.
        assert cull_idle_sessions(now=start + timedelta(minutes=34))["warned"] == 0
        later = start + timedelta(minutes=36)
        assert cull_idle_sessions(now=later)["warned"] == 1
        assert cull_idle_sessions(now=later + timedelta(minutes=1))["warned"] == 0  # once
        session.refresh_from_db()
        assert session.idle_warned_at == later and session.kernel_activity_at == start + timedelta(minutes=5)
        assert len(mail.outbox) == 1 and "stop in 5 minutes" in mail.outbox[0].subject
        # Used again: a cell ran after the warning. The warning goes, nothing is stopped.
        server.kernels = [_kernel(later + timedelta(minutes=2))]
        counts = cull_idle_sessions(now=later + timedelta(minutes=3))
        assert counts["used_again"] == 1 and counts["stopped"] == 0
        session.refresh_from_db()
        assert session.idle_warned_at is None and session.stop_reason == ""
        # Idle again for the whole limit and the warning: stopped, with its reason.
        again = later + timedelta(minutes=2 + 30)
        assert cull_idle_sessions(now=again)["warned"] == 1
        assert cull_idle_sessions(now=again + timedelta(minutes=4))["stopped"] == 0
        assert cull_idle_sessions(now=again + timedelta(minutes=5))["stopped"] == 1
        session.refresh_from_db()
        assert session.stop_reason == "idle"
        # This job never reached Slurm, so the cancel could not happen: the next pass tries again.
        assert cull_idle_sessions(now=again + timedelta(minutes=6))["stopped"] == 1


def test_a_busy_kernel_or_a_busy_gpu_is_activity(alice):
    start = timezone.now()
    with upstream_server() as (port, _ws, server):
        session = _ready_session(alice, port, start)
        late = start + timedelta(hours=2)
        server.kernels = [_kernel(start, state="busy")]  # a long cell still running
        # ... on its GPU (a little traffic, under the idle threshold: the cell is busy with it).
        GpuSampleRaw.objects.create(
            time=late - timedelta(minutes=10), node="gpu-4090-01", index=1, compute_util=2, memory_util=1,
            memory_used_mb=100, memory_total_mb=24000, temperature_c=40, power_w=60,
        )  # fmt: skip
        assert cull_idle_sessions(now=late)["warned"] == 0
        # Kernels quiet, but the GPU computed 10 minutes ago (a background thread training).
        server.kernels = [_kernel(start)]
        GpuSampleRaw.objects.create(
            time=late + timedelta(hours=1) - timedelta(minutes=10),
            node="gpu-4090-01",
            index=1,
            compute_util=60,
            memory_util=10,
            memory_used_mb=100,
            memory_total_mb=24000,
            temperature_c=50,
            power_w=200,
        )
        assert cull_idle_sessions(now=late + timedelta(hours=1))["warned"] == 0
        # Another GPU of the node busy is not this session's.
        assert cull_idle_sessions(now=late + timedelta(hours=1, minutes=21))["warned"] == 1
        session.refresh_from_db()
        assert session.idle_warned_at is not None


def test_a_server_that_does_not_answer_is_judged_by_its_gpus_alone(alice):
    start = timezone.now()
    session = _ready_session(alice, 1, start)  # nothing listens on port 1
    assert cull_idle_sessions(now=start + timedelta(minutes=29))["warned"] == 0
    assert cull_idle_sessions(now=start + timedelta(minutes=31))["warned"] == 1
    session.refresh_from_db()
    assert session.kernel_activity_at is None


def test_a_server_that_says_too_much_says_nothing(alice):
    start = timezone.now()
    with upstream_server() as (port, _ws, server):
        server.kernels = "huge"  # "busy" over and over, past the 1 MiB the portal reads
        _ready_session(alice, port, start)
        assert cull_idle_sessions(now=start + timedelta(minutes=31))["warned"] == 1


def test_the_plans_limit_decides(alice):
    from plans.models import Plan

    Plan.objects.filter(code="pro").update(session_idle_minutes=90)
    start = timezone.now()
    _ready_session(alice, 1, start)
    assert cull_idle_sessions(now=start + timedelta(minutes=60))["warned"] == 0
    assert cull_idle_sessions(now=start + timedelta(minutes=91))["warned"] == 1


def test_the_emulator_draws_a_sessions_gpus_idle_while_its_kernels_are(alice):
    now = timezone.now()
    quiet = _ready_session(alice, 1, now)
    busy = _ready_session(alice, 1, now)
    InteractiveSession.objects.filter(pk=busy.pk).update(kernel_activity_at=now - timedelta(seconds=30))
    InteractiveSession.objects.filter(pk=quiet.pk).update(kernel_activity_at=now - timedelta(minutes=10))
    assert emulated_idle_sessions(now) == {quiet.job_id}


def test_a_server_that_calls_its_kernel_busy_over_still_gpus_is_idle(alice):
    """The server runs in the user's job: "busy" for ever kept GPUs held that did nothing."""
    start = timezone.now()
    with upstream_server() as (port, _ws, server):
        session = _ready_session(alice, port, start)
        server.kernels = [_kernel(start, state="busy")]
        GpuSampleRaw.objects.create(
            time=start + timedelta(minutes=20), node="gpu-4090-01", index=1, compute_util=0, memory_util=0,
            memory_used_mb=100, memory_total_mb=24000, temperature_c=35, power_w=20,
        )  # fmt: skip
        assert cull_idle_sessions(now=start + timedelta(minutes=31))["warned"] == 1
        session.refresh_from_db()
        assert session.idle_warned_at is not None


def test_a_terminals_keystrokes_are_use_and_its_output_only_while_the_gpus_move(alice):
    start = timezone.now()
    with upstream_server() as (port, _ws, server):
        session = _ready_session(alice, port, start)
        server.kernels = []
        late = start + timedelta(minutes=40)
        # `watch nvidia-smi` printing in a terminal over still GPUs: not use.
        InteractiveSession.objects.filter(pk=session.pk).update(terminal_output_at=late - timedelta(minutes=1))
        assert cull_idle_sessions(now=late)["warned"] == 1
        # A keystroke is: the warning goes.
        InteractiveSession.objects.filter(pk=session.pk).update(terminal_input_at=late + timedelta(minutes=1))
        assert cull_idle_sessions(now=late + timedelta(minutes=2))["used_again"] == 1
        # Output while the GPUs move (a training run started from the terminal) is use too.
        much_later = late + timedelta(minutes=50)
        InteractiveSession.objects.filter(pk=session.pk).update(terminal_output_at=much_later - timedelta(minutes=1))
        GpuSampleRaw.objects.create(
            time=much_later - timedelta(minutes=5), node="gpu-4090-01", index=1, compute_util=3, memory_util=2,
            memory_used_mb=100, memory_total_mb=24000, temperature_c=40, power_w=60,
        )  # fmt: skip
        assert cull_idle_sessions(now=much_later)["warned"] == 0
