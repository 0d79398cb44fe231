"""A sweep as its users drive it, on the real portal (web process, worker, beat) and cluster: in
Debian's Chromium (24 points, throttle 4, the grid filling live, the throttle raised to 8, the two
failed points rerun, the metric plot and the cost; then the page at phone width), and through a
client generated from the OpenAPI document. Other users see none of it."""

from __future__ import annotations

import importlib
import re

import pytest

from accounts.models import ApiToken
from cluster.clusters.services import slurm_cli
from conftest import subscribe
from jobs.models import Job, Sweep
from jobs.tests.test_api_client import PACKAGE, client_package, generate_client  # noqa: F401  (a fixture)
from testing.browser import chromium_page, log_in
from testing.servers import portal_stack
from testing.slurm import wait_for

playwright_api = pytest.importorskip("playwright.sync_api")
expect = playwright_api.expect

# The Slurm side of sweeps is checked on every release by test_sweeps_live.py; these, the browser's
# and a generated client's view of it, on the first (scripts/test.sh).
pytestmark = [pytest.mark.slurm, pytest.mark.first_release, pytest.mark.django_db(transaction=True)]

# Points 11 and 23 (a=1 b=5 and a=3 b=5) fail in the sweep's own 24-task array and
# pass when rerun (an array of 2).
PARAMETERS = "a = 0, 1, 2, 3\nb = range(0, 5, 1)"
COMMAND = (
    'echo "a={a} b={b}"; if [ "$b" = 5 ] && [ "$SLURM_ARRAY_TASK_COUNT" = 24 ] && [ $(( a % 2 )) = 1 ]; '
    'then exit 4; fi; echo "GPUPOOL_METRIC loss=$(( (a - 2) * (a - 2) + b ))"; sleep 2'
)


@pytest.mark.browser
def test_a_sweep_in_the_browser(alice, bob, provision, tmp_path):
    subscribe(alice, "enterprise")  # 4 RTX 4090 at once: a throttle of 4 is what holds them back
    provision(alice)
    with chromium_page(playwright_api, width=1280, height=900) as page, portal_stack(worker=True, beat=True) as base:
        log_in(page, base, "alice", "pw-alice")
        errors = []
        page.on("pageerror", lambda error: errors.append(error))
        page.goto(f"{base}/jobs/new/")
        page.fill("#id_name", "browser-sweep")
        page.fill("#id_image", "nvcr.io/nvidia/pytorch:24.05-py3")
        page.select_option("#id_gpu_type", "rtx4090")
        page.fill("#id_gpu_count", "1")
        page.fill("#id_command", COMMAND)
        page.fill("#id_time_limit_minutes", "3")
        page.check("[data-sweep-toggle]")
        expect(page.locator("[data-submit]")).to_have_text("Quote the sweep")
        page.fill("#id_parameters", PARAMETERS)
        page.fill("#id_throttle", "4")
        page.fill("#id_metric", "loss")
        page.click("[data-submit]")
        # The quote first: 24 tasks x 3 min at Enterprise prices, nothing covered.
        quote = page.locator("[data-sweep-quote]")
        expect(quote).to_contain_text("24 tasks")
        expect(quote).to_contain_text("$")
        expect(quote).to_contain_text("a=0 b=0")  # the command one task runs, values pasted in
        assert Sweep.objects.count() == 0
        expect(page.locator("[data-submit]")).to_have_text("Submit the sweep's 24 tasks")
        page.click("[data-submit]")
        page.wait_for_url(re.compile(r".*/sweeps/\d+/$"))
        sweep = Sweep.objects.get(owner=alice)
        assert (sweep.point_count, sweep.throttle) == (24, 4)
        page.evaluate("window.__marker = 'no reload'")
        expect(page.locator("[data-live-indicator]")).to_have_text("Live", timeout=15000)
        cells = page.locator("[data-sweep-grid] .cell")
        expect(cells).to_have_count(24)
        # The grid fills live: squares turn running, then done.
        expect(page.locator("[data-sweep-grid] .cell.running").first).to_be_visible(timeout=60000)
        page.fill("[data-throttle]", "8")
        page.click("form[action$='/throttle'] button")
        expect(page.locator(".messages")).to_contain_text("Throttle set: 8")
        array_id = sweep.arrays.get().slurm_array_job_id
        shown = slurm_cli().run("scontrol", "show", "job", str(array_id)).stdout
        assert "ArrayTaskThrottle=8" in shown or "JobState=COMPLETED" in shown or "JobState=FAILED" in shown
        page.evaluate("window.__marker = 'no reload'")
        expect(page.locator("[data-sweep-grid] .cell.failed")).to_have_count(2, timeout=120000)
        expect(page.locator("[data-sweep-grid] .cell.done")).to_have_count(22, timeout=60000)
        assert page.evaluate("window.__marker") == "no reload"
        expect(page.locator("[data-count=FAILED]")).to_have_text("failed 2")

        # The steering, the task table and the arrays line follow without a reload.
        page.click("[data-rerun-failed]", timeout=20000)
        expect(page.locator(".messages")).to_contain_text("Running 2 tasks again: 11, 23")
        page.evaluate("window.__marker = 'no reload'")
        expect(page.locator("[data-sweep-grid] .cell.done")).to_have_count(24, timeout=90000)
        expect(page.locator("[data-best]")).to_contain_text("loss = 0", timeout=30000)
        expect(page.locator("[data-best]")).to_contain_text("a=2, b=0")
        expect(page.locator("[data-sweep-plots] [data-drawn='1']")).to_have_count(2, timeout=15000)
        expect(page.locator("[data-sweep-cost]")).to_contain_text("$")
        expect(page.locator("[data-task-row] .badge.state-completed")).to_have_count(24, timeout=20000)
        expect(page.locator("button[form=cancel-pending]")).to_have_count(0)
        expect(page.locator("[data-rerun-failed]")).to_have_count(0)
        expect(page.locator("[data-sweep-arrays]")).not_to_contain_text("being submitted")
        expect(page.locator("[data-live-updated]")).to_contain_text("nothing more is changing", timeout=20000)
        assert page.evaluate("window.__marker") == "no reload"
        # Sorted by the metric and filtered by a parameter, as the table offers.
        page.select_option("select[name=sort]", "metric")
        page.select_option("select[name='p.a']", "2")
        page.click(".sweep-filter button")
        expect(page.locator("[data-task-row]")).to_have_count(6)
        expect(page.locator("[data-task-row]").first).to_have_attribute("data-task-row", "12")
        page.screenshot(path=str(tmp_path / "sweep-desktop.png"), full_page=True)

        page.set_viewport_size({"width": 390, "height": 844})
        page.goto(f"{base}/jobs/sweeps/{sweep.pk}/")
        grid = page.locator("[data-sweep-grid]")
        expect(grid).to_be_visible()
        box = grid.bounding_box()
        assert box["width"] <= 390, box  # the grid wraps to a phone's width
        page.screenshot(path=str(tmp_path / "sweep-phone.png"), full_page=True)
        assert errors == []

        # Bob sees none of it: the page, its cells and the API are 404s to him.
        page.context.clear_cookies()
        log_in(page, base, "bob", "pw-bob")
        for path in (f"/jobs/sweeps/{sweep.pk}/", f"/jobs/sweeps/{sweep.pk}/cells.json", f"/api/v1/sweeps/{sweep.pk}"):
            assert page.goto(f"{base}{path}").status == 404, path
        page.goto(f"{base}/jobs/sweeps/")
        expect(page.locator("body")).not_to_contain_text("browser-sweep")
    assert Job.objects.filter(sweep=sweep, state="COMPLETED", sweep_current=True).count() == 24


def test_a_sweep_through_a_generated_client(alice, bob, provision, client_package):  # noqa: F811
    subscribe(alice, "enterprise")
    provision(alice)
    _token, key = ApiToken.issue(alice, "generated client")
    _other, bob_key = ApiToken.issue(bob, "generated client")
    with portal_stack(worker=True, beat=True) as base_url:
        generate_client(f"{base_url}/api/schema/?format=json", client_package)
        client_module = importlib.import_module(PACKAGE)
        api = {
            name: importlib.import_module(f"{PACKAGE}.api.sweeps.{name}")
            for name in [
                "sweeps_create",
                "sweeps_retrieve",
                "sweeps_tasks",
                "sweeps_throttle",
                "sweeps_rerun",
                "sweeps_cancel",
                "sweeps_list",
            ]
        }
        models = importlib.import_module(f"{PACKAGE}.models")
        client = client_module.AuthenticatedClient(base_url=base_url, token=key, raise_on_unexpected_status=True)
        other = client_module.AuthenticatedClient(base_url=base_url, token=bob_key)

        def sweep_input(**overrides):
            fields = {
                "name": "client-sweep",
                "image": "nvcr.io/nvidia/pytorch:24.05-py3",
                "gpu_type": models.GpuTypeEnum("rtx4090"),
                "gpu_count": 1,
                "command": 'echo "lr={lr}"; [ "$GPUPOOL_SWEEP_INDEX" = 2 ] && [ "$SLURM_ARRAY_TASK_COUNT" = 4 ]'
                " && exit 5; sleep 2",
                "time_limit_minutes": 3,
                "throttle": 2,
                **overrides,
            }
            body = models.SweepInput(**fields)
            body.parameters = models.SweepInputParametersType0.from_dict({"lr": {"log": [0.001, 1, 4]}})
            return body

        refused = api["sweeps_create"].sync_detailed(client=client, body=sweep_input(throttle=9))
        assert refused.status_code == 400 and "throttle" in refused.parsed.errors.to_dict()
        created = api["sweeps_create"].sync(client=client, body=sweep_input())
        assert isinstance(created, models.Sweep), created
        assert created.point_count == 4 and created.throttle == 2 and created.parameters == ["lr"]
        assert created.quote.tasks == 4 and created.quote.gpu_seconds == 4 * 180

        changed = api["sweeps_throttle"].sync(client=client, id=created.id, body=models.Throttle(throttle=3))
        assert changed.throttle == 3

        def ended():
            found = api["sweeps_retrieve"].sync(client=client, id=created.id)
            done = found.counts.to_dict()
            return found if done.get("COMPLETED", 0) + done.get("FAILED", 0) == 4 else None

        finished = wait_for(ended, timeout=180, interval=1, what="the sweep's four tasks to end")
        assert finished.counts.to_dict() == {"COMPLETED": 3, "FAILED": 1}
        tasks = api["sweeps_tasks"].sync(client=client, id=created.id, sort="-lr")
        assert [task.parameters.to_dict()["lr"] for task in tasks] == [1, 0.1, 0.01, 0.001]
        failed = [task for task in tasks if task.state == "FAILED"]
        assert [(task.sweep_index, task.exit_code) for task in failed] == [(2, 5)]

        api["sweeps_rerun"].sync(client=client, id=created.id, body=models.Rerun(tasks=[2]))
        wait_for(
            lambda: api["sweeps_retrieve"].sync(client=client, id=created.id).counts.to_dict() == {"COMPLETED": 4},
            timeout=120,
            interval=1,
            what="the rerun to complete",
        )
        history = api["sweeps_tasks"].sync(client=client, id=created.id, history=True)
        assert len(history) == 5 and sum(1 for task in history if not task.sweep_current) == 1
        cancelled = api["sweeps_cancel"].sync_detailed(client=client, id=created.id, body=models.Cancel())
        assert cancelled.status_code == 200  # nothing pending: nothing to do, no error
        assert [item.id for item in api["sweeps_list"].sync(client=client)] == [created.id]

        # Bob, with his own token, sees none of it.
        assert api["sweeps_retrieve"].sync_detailed(client=other, id=created.id).status_code == 404
        assert api["sweeps_tasks"].sync_detailed(client=other, id=created.id).status_code == 404
        assert (
            api["sweeps_throttle"]
            .sync_detailed(client=other, id=created.id, body=models.Throttle(throttle=1))
            .status_code
            == 404
        )
        assert api["sweeps_list"].sync(client=other) == []
    assert Sweep.objects.get(pk=created.id).throttle == 3
