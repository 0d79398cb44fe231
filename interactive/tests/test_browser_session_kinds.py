"""In Chromium at phone width, as a researcher would: "New VS Code", watch it start (pushed, no reload),
open the editor through the portal and run a command in its terminal; then "New TensorBoard" on a
sweep that has ended, open it and see the sweep's tasks as runs side by side."""

import re
import time

import pytest

from conftest import subscribe
from interactive.models import InteractiveSession
from interactive.tests.test_session_kinds_live import SWEEP
from jobs import protocol
from jobs.logs import local_log_path, read_head
from jobs.models import UNREAD_OR_UNFINISHED, Sweep
from jobs.tasks import run_sync
from sweeps import queries
from testing.browser import chromium_page, log_in
from testing.servers import free_port, portal_stack
from testing.slurm import wait_for

playwright_api = pytest.importorskip("playwright.sync_api")
expect = playwright_api.expect

pytestmark = [
    pytest.mark.browser,
    pytest.mark.slurm,
    pytest.mark.first_release,
    pytest.mark.django_db(transaction=True),
]


def _start(page, kind_link: str, choose) -> tuple[InteractiveSession, float]:
    """From the sessions page: the app's button, the form, Start; the session and seconds to Ready."""
    page.click(f"text={kind_link}")
    page.select_option("#id_gpu_type", "rtx4090")
    choose(page)
    clicked = time.monotonic()
    page.click("[data-start-session]")
    page.wait_for_url(re.compile(r".*/sessions/\d+/$"))
    session = InteractiveSession.objects.get(pk=int(page.url.rstrip("/").rsplit("/", 1)[1]))
    page.evaluate("window.__marker = 'no reload'")
    expect(page.locator("[data-session-state-label]")).to_have_text("Ready", timeout=120000)
    seconds = time.monotonic() - clicked
    assert page.evaluate("window.__marker") == "no reload"  # pushed, not reloaded
    assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
    return session, seconds


def test_vs_code_and_a_tensorboard_of_a_sweep_from_the_sessions_page(
    alice, provision, api_client_for, settings, eager_tasks
):
    subscribe(alice, "pro")  # two RTX 4090 at once: the editor and the board
    provision(alice)
    sweep_answer = api_client_for(alice).post(
        "/api/v1/sweeps/",
        {**SWEEP, "image": "registry.local/gpupool/pytorch-code-server:24.05-4.139.1"},
        format="json",
    )
    assert sweep_answer.status_code == 201, sweep_answer.content
    sweep = Sweep.objects.get(pk=sweep_answer.json()["id"])

    def ended():
        run_sync()
        return not queries.current_tasks(sweep).filter(UNREAD_OR_UNFINISHED).exists()

    wait_for(ended, timeout=240, interval=0.5, what="the sweep's tasks to end")

    port = free_port()
    site = f"http://127.0.0.1:{port}"
    with (
        chromium_page(playwright_api, width=390, height=844) as page,
        portal_stack(worker=True, beat=True, port=port, extra_env={"SITE_URL": site}) as base_url,
    ):
        log_in(page, base_url, "alice", "pw-alice")
        page.goto(f"{base_url}/sessions/")
        editor, editor_seconds = _start(page, "New VS Code", lambda page: None)
        expect(page.locator("[data-open-session]")).to_have_text("Open VS Code")
        with page.context.expect_page() as opened:
            page.click("[data-open-session]")
        code = opened.value
        code.set_viewport_size({"width": 1280, "height": 900})
        code.wait_for_url(re.compile(rf"http://s-{editor.host_key}\.sessions\.localhost:{port}/.*"), timeout=60000)
        expect(code.locator(".monaco-workbench")).to_be_visible(timeout=90000)
        # A terminal in the job's container: the GPU Slurm gave the job.
        code.keyboard.press("Control+Backquote")
        terminal = code.locator(".terminal .xterm-rows, .terminal .xterm-screen").first
        expect(terminal).to_be_visible(timeout=60000)
        terminal.click()
        code.wait_for_timeout(3000)  # the shell's prompt
        # xterm draws on a canvas: what the command printed is read from the file it wrote.
        code.keyboard.type("echo gpus=$CUDA_VISIBLE_DEVICES > from-the-terminal.txt")
        code.keyboard.press("Enter")
        written = local_log_path(f"{protocol.job_directory(editor.job)}/from-the-terminal.txt", editor.job.cluster_user)
        assert wait_for(lambda: read_head(written, 100), timeout=30, what="the terminal's command") == "gpus=0\n"
        # Typing is use: the proxy saw the workbench's requests (the idle rule).
        editor.refresh_from_db()
        assert editor.browser_input_at is not None

        page.goto(f"{base_url}/sessions/")

        def board_of_the_sweep(page):
            page.select_option("#id_board_sweep", str(sweep.pk))

        board, board_seconds = _start(page, "New TensorBoard", board_of_the_sweep)
        assert board.board_sweep_id == sweep.pk
        expect(page.locator("[data-session-summary]")).to_contain_text(f"sweep #{sweep.pk}")
        with page.context.expect_page() as opened:
            page.click("[data-open-session]")
        tensorboard = opened.value
        tensorboard.set_viewport_size({"width": 1280, "height": 900})
        expect(tensorboard.get_by_text("sweep/0/runs").first).to_be_visible(timeout=90000)
        expect(tensorboard.get_by_text("sweep/1/runs").first).to_be_visible(timeout=30000)
        print(f"click to ready: VS Code {editor_seconds:.1f} s, TensorBoard {board_seconds:.1f} s")
        for session in (editor, board):
            page.goto(f"{base_url}/sessions/{session.pk}/")
            page.once("dialog", lambda dialog: dialog.accept())
            page.click("text=Stop session")
            expect(page.locator("[data-session-state-label]")).to_have_text("Stopped", timeout=60000)
