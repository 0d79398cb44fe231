"""An admin in Debian's Chromium groups a week's failures nobody recognised, writes a rule for the
largest group, sees which past failures it would name and which healthy run it would flag, saves it,
enables it (asked first) and finds the user's job page naming the failure; the groups page at phone
width too. The week's runs are recorded rows (failures.actions keeps the same from real logs)."""

from datetime import timedelta
from pathlib import Path

import pytest
from django.utils import timezone

from failures.models import FinishedRun
from jobs.diagnosis.signature import signature_of
from jobs.models import Job
from testing.browser import chromium_page, log_in
from testing.servers import daphne_server

playwright_api = pytest.importorskip("playwright.sync_api")
expect = playwright_api.expect

SCREENSHOTS = Path(__file__).resolve().parents[2] / "var" / "test-logs"

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

SHARD = (
    "Traceback (most recent call last):\n"
    '  File "/home/alice/run{n}/train.py", line 8, in <module>\n'
    "lakefs.ShardIndexCorrupt: shard {n}7 of /data/shards/set{n} has a bad index at 0x{n}f3a\n"
)


def _run(owner, n: int, tail: str, *, outcome="failed", days_ago=1) -> FinishedRun:
    ended = timezone.now() - timedelta(days=days_ago)
    state = "FAILED" if outcome == "failed" else "COMPLETED"
    job = Job.objects.create(owner=owner, slurm_job_id=7000 + n, state=state, exit_code=1, end_time=ended)
    signature = signature_of(tail)
    return FinishedRun.objects.create(
        job=job,
        outcome=outcome,
        ended_at=ended,
        owner=owner,
        image="nvcr.io/nvidia/pytorch:24.05-py3",
        state=state,
        exit_code=1,
        signature=signature.digest,
        signature_text=signature.text,
        tail=tail,
        diagnosed_at=timezone.now(),
    )


def test_an_admin_writes_tries_and_enables_a_rule_for_a_weeks_unrecognised_failures(admin_user, alice, bob):
    for n, days in ((1, 1), (2, 2), (3, 5), (4, 6)):
        _run(alice if n % 2 else bob, n, SHARD.format(n=n), days_ago=days)
    _run(alice, 5, "lakefs: giving up after 3 retries\n", days_ago=3)
    _run(alice, 6, "epoch 1 loss 2.1\nwarning: ShardIndexCorrupt: shard 3 skipped\n", outcome="healthy")
    with chromium_page(playwright_api) as page, daphne_server() as base_url:
        log_in(page, base_url, "ada", "pw-ada")
        page.goto(f"{base_url}/console/failures/")
        groups = page.locator("tr[data-failure-group]")
        expect(groups).to_have_count(2)
        expect(groups.first.locator("[data-week]")).to_have_text("4")
        expect(groups.first).to_contain_text("ShardIndexCorrupt: shard <n> of <path>")
        expect(groups.first).to_contain_text("alice, bob")

        groups.first.locator("a").click()
        expect(page.locator("[data-sample]")).to_contain_text("set1 has a bad index")
        page.fill("input[name=slug]", "shard-index")
        page.fill("input[name=title]", "Shard index corrupt")
        page.fill("textarea[name=cause]", "A data shard's index is damaged, so the loader stopped.")
        page.fill("textarea[name=fix]", "Rebuild the shard index with lakefs reindex and resubmit.")
        # The pattern the page suggests from the folded lines names the whole group.
        page.click("[data-try]")
        expect(page.locator("[data-in-group]")).to_contain_text("4 of 4")
        # A looser one would also flag the healthy run's warning...
        page.fill("input[name=pattern]", "ShardIndexCorrupt")
        page.click("[data-try]")
        expect(page.locator("[data-flags]")).to_contain_text("1 healthy run")
        # ...narrowed to the error itself, it flags nothing healthy.
        page.fill("input[name=pattern]", r"^lakefs\.ShardIndexCorrupt: shard \d+")
        page.click("[data-try]")
        expect(page.locator("[data-flags]")).to_contain_text("0 healthy runs")
        expect(page.locator("[data-named] li")).to_have_count(4)

        page.click("[data-save]")
        expect(page.locator("[data-enabled]")).to_have_text("disabled")
        page.once("dialog", lambda dialog: dialog.accept())
        page.click("[data-toggle]")
        expect(page.locator("[data-enabled]")).to_have_text("enabled")
        expect(page.locator("ul.messages")).to_contain_text("it named 4 past failures")

        page.goto(f"{base_url}/console/failures/")
        expect(page.locator("tr[data-failure-group]")).to_have_count(1)
        page.goto(f"{base_url}/console/failures/rules/")
        expect(page.locator("tr[data-rule='site-shard-index'] [data-named]")).to_have_text("4")

    assert FinishedRun.objects.filter(rule_id="site-shard-index").count() == 4


def test_the_failures_page_fits_a_phone(admin_user, alice):
    for n in (1, 2):
        _run(alice, n, SHARD.format(n=n) + "x" * 300 + "\n")
    with chromium_page(playwright_api, width=390, height=844) as page, daphne_server() as base_url:
        log_in(page, base_url, "ada", "pw-ada")
        page.goto(f"{base_url}/console/failures/")
        expect(page.locator("tr[data-failure-group]")).to_have_count(1)
        page_width, viewport = page.evaluate("() => [document.documentElement.scrollWidth, window.innerWidth]")
        assert page_width <= viewport, (page_width, viewport)
        page.locator("tr[data-failure-group] a").click()
        expect(page.locator("[data-rule-form]")).to_be_visible()
        page_width, viewport = page.evaluate("() => [document.documentElement.scrollWidth, window.innerWidth]")
        assert page_width <= viewport, (page_width, viewport)
        page.screenshot(path=str(SCREENSHOTS / "failure-group-phone.png"), full_page=True)
