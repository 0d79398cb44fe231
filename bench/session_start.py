"""Click to a ready session (JupyterLab, VS Code or TensorBoard), on an idle GPU of the real dev
cluster, as a user sees it.

In Chromium (Debian's, as the browser tests run it): the Start click on the new-session page of the
app, to the page saying "Ready" (pushed over its WebSocket once the server answered the portal). A
TensorBoard shows a job of the user's that wrote nothing (its directory made here, as Slurm would).
Each session is then stopped and its job waited out, so the next one meets an idle GPU. Beside the
total, where the time went, from the database: the job's submission to Slurm's start (Slurm and
the batch script up to starting the container, by the script's own clock), the server's start
(the container starting to the portal's probe answered), and the rest (the push and the page).

    .venv/bin/python bench/session_start.py [--sessions 10] [--kind jupyterlab|vscode|tensorboard]

Starts the web process, a Celery worker and beat on a throwaway database, as `make dev` runs them. Goal
(docs/sessions.md): p50 <= 20 s, p95 <= 60 s.
"""

import os
import re
import time

from _common import bench_database, make_user, options, percentile, retire_user


def _container_launch(job) -> float:
    from cluster.clusters.services import job_paths
    from jobs import protocol
    from jobs.submission.batch_script import CONTAINER_LAUNCH

    stderr = (job_paths().to_local(protocol.job_directory(job)) / "stderr.log").read_text()
    return float(next(line for line in stderr.splitlines() if line.startswith(CONTAINER_LAUNCH)).split()[-1])


VSCODE_IMAGE = "registry.local/gpupool/pytorch-code-server:24.05-4.139.1"


def _board_job(user):
    """A finished job of `user`'s for a TensorBoard to show: a row and its directory, owned by the
    user's cluster account as Slurm leaves it."""
    from cluster.clusters.services import job_paths
    from jobs import protocol
    from jobs.models import Job, JobState

    job = Job.objects.create(
        owner=user,
        slurm_job_id=1,
        state=JobState.COMPLETED,
        name="trained",
        cluster_user=user.profile.cluster_username,
    )
    directory = job_paths().to_local(protocol.job_directory(job))
    for path in (directory.parent, directory):
        if not path.exists():
            path.mkdir(mode=0o750)
            os.chown(path, user.profile.cluster_uid, user.profile.cluster_gid)
    return job


def main():
    args = options(sessions=10, kind="jupyterlab")

    from django.db import connections
    from playwright.sync_api import expect, sync_playwright

    from cluster.clusters.services import rest_client
    from interactive.models import InteractiveSession
    from testing.servers import CHROMIUM_ARGS, CHROMIUM_PATH, free_port, portal_stack
    from testing.slurm import wait_for_state

    os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    with bench_database():
        user = make_user("sess", plan="pro")
        user.set_password("bench-password")
        user.save()
        # Made before Playwright starts: queries under its sync API run on a connection of their own.
        board = _board_job(user) if args.kind == "tensorboard" else None
        port = free_port()
        totals, slurm_parts, server_parts, rest = [], [], [], []
        try:
            with (
                portal_stack(
                    worker=True, beat=True, port=port, extra_env={"SITE_URL": f"http://127.0.0.1:{port}"}
                ) as base_url,
                sync_playwright() as playwright,
            ):
                browser = playwright.chromium.launch(executable_path=CHROMIUM_PATH, args=CHROMIUM_ARGS)
                page = browser.new_page()
                page.goto(f"{base_url}/accounts/login/")
                page.fill("input[name=login]", user.username)
                page.fill("input[name=password]", "bench-password")
                page.click("button[type=submit]")
                page.wait_for_url(f"{base_url}/")
                for number in range(args.sessions):
                    page.goto(f"{base_url}/sessions/new/?kind={args.kind}")
                    page.select_option("#id_gpu_type", "rtx4090")
                    if args.kind == "vscode":
                        page.select_option("#id_image", VSCODE_IMAGE)
                    if board is not None:
                        page.select_option("#id_board_job", str(board.pk))
                    started = time.perf_counter()
                    page.click("[data-start-session]")
                    page.wait_for_url(re.compile(r".*/sessions/\d+/$"))
                    expect(page.locator("[data-session-state-label]")).to_have_text("Ready", timeout=180000)
                    total = time.perf_counter() - started
                    session = InteractiveSession.objects.select_related("job").order_by("-pk").first()
                    job = session.job
                    # Slurm's start time is to the second: the batch script's own clock, just
                    # before it starts the container, splits the wait precisely.
                    launched = _container_launch(job)
                    to_start = launched - job.created_at.timestamp()
                    server = session.ready_at.timestamp() - launched
                    totals.append(total)
                    slurm_parts.append(to_start)
                    server_parts.append(server)
                    rest.append(total - to_start - server)
                    print(
                        f"session {number + 1}: {total:.1f} s (to Slurm's start {to_start:.1f} s, "
                        f"server {server:.1f} s, the rest {total - to_start - server:.1f} s)",
                        flush=True,
                    )
                    page.once("dialog", lambda dialog: dialog.accept())
                    page.click("form[action$='/stop'] button")
                    expect(page.locator("[data-session-state-label]")).to_have_text("Stopped", timeout=60000)
                    wait_for_state(rest_client(), job.slurm_job_id, {"CANCELLED", "COMPLETED", "FAILED"})
                    time.sleep(2)  # the GPU back to idle in Slurm before the next click
                browser.close()
                # Queries made under Playwright's sync API ran in its greenlet's context, on a
                # connection of their own: closed here, or the database cannot be dropped.
                connections.close_all()
        finally:
            retire_user(user)

    def line(label, values):
        p50, p95 = percentile(values, 0.5), percentile(values, 0.95)
        return f"{label}: p50 {p50:.1f} s, p95 {p95:.1f} s, max {max(values):.1f} s"

    print(f"{args.kind}, {len(totals)} sessions")
    print(line("click to ready (goal p50 <= 20 s, p95 <= 60 s)", totals))
    print(line("  submission to the container's launch (Slurm, the batch script)", slurm_parts))
    print(line("  the container and the app starting, to the portal's probe answered", server_parts))
    print(line("  the rest (the portal noticing, the push, the page)", rest))


if __name__ == "__main__":
    main()
