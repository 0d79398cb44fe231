"""A dataset's upload from Debian's Chromium: one stream against two parts at once, in one run.

    .venv/bin/python bench/datasets_browser.py [--mb 512] [--rounds 2]

The portal as `make dev` runs it (web process and a worker) on a throwaway PostgreSQL database and a
throwaway DATASET_STORE; each round uploads the same file into a new dataset twice, once as
the page sends it (static/js/datasets_upload.js: two parts at once from 64 MiB) and once with
parts turned off (the page's script served with its threshold raised past the file), from
the click to the last byte in (the page's "Committing…"), alternating which goes first. Prints
each time, the rate, and the ratio of the medians; also `cp` of the file on the same machine.
"""

import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from _common import bench_database, make_user, options


def _upload(browser, base_url: str, dataset_id: int, source: Path, parts: bool) -> float:
    from testing.browser import log_in

    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    if not parts:

        def without_parts(route):
            body = route.fetch().text().replace("const PARTS_FROM = 64 * 1024 * 1024;", "const PARTS_FROM = Infinity;")
            route.fulfill(body=body, content_type="application/javascript")

        page.route("**/datasets_upload.js", without_parts)
    log_in(page, base_url, "ds", "bench-ds")
    page.goto(f"{base_url}/datasets/{dataset_id}/")
    page.set_input_files("[data-files]", str(source))
    started = time.monotonic()
    page.click("[data-start]")
    page.wait_for_function(
        "document.querySelector('[data-status]').textContent.startsWith('Committing')", timeout=600000, polling=50
    )
    seconds = time.monotonic() - started
    context.close()
    return seconds


def main():
    args = options(mb=512, rounds=2)
    from django.db import connections
    from playwright.sync_api import sync_playwright

    from datasets import actions
    from testing.servers import CHROMIUM_ARGS, CHROMIUM_PATH, portal_stack

    times = {"one stream": [], "two parts": []}
    with tempfile.TemporaryDirectory(prefix="bench-ds-browser-") as folder, bench_database():
        source = Path(folder) / "data.bin"
        with open(source, "wb") as out:
            for _ in range(args.mb):
                out.write(os.urandom(1000 * 1000))
        started = time.monotonic()
        shutil.copyfile(source, Path(folder) / "copy.bin")
        os.sync()
        cp_seconds = time.monotonic() - started
        os.unlink(Path(folder) / "copy.bin")
        user = make_user("ds", plan="enterprise", provision=False)
        store = {"DATASET_STORE": str(Path(folder) / "store")}
        with sync_playwright() as playwright, portal_stack(worker=True, extra_env=store) as base_url:
            browser = playwright.chromium.launch(executable_path=CHROMIUM_PATH, args=CHROMIUM_ARGS)
            try:
                for round_number in range(args.rounds):
                    order = [True, False] if round_number % 2 == 0 else [False, True]
                    for parts in order:
                        dataset = actions.create_dataset(user, name=f"r{round_number}-{'parts' if parts else 'one'}")
                        seconds = _upload(browser, base_url, dataset.pk, source, parts)
                        times["two parts" if parts else "one stream"].append(seconds)
                        print(
                            f"round {round_number + 1}, {'two parts' if parts else 'one stream'}: {seconds:.2f} s",
                            flush=True,
                        )
            finally:
                browser.close()
                # Playwright's sync API runs this block in a greenlet of its own, whose database
                # connection bench_database's clean-up (outside it) would not see.
                connections.close_all()
    print(f"{args.mb} MB from Chromium, {args.rounds} rounds each (click to last byte in):")
    print(f"  cp of the file (synced)  {cp_seconds:.2f} s ({args.mb / cp_seconds:.0f} MB/s)")
    for label, values in times.items():
        median = statistics.median(values)
        rounds = ", ".join(f"{value:.2f}" for value in values)
        print(f"  {label:22s} {rounds} s; median {median:.2f} s ({args.mb / median:.0f} MB/s)")
    ratio = statistics.median(times["one stream"]) / statistics.median(times["two parts"])
    print(f"  RATIO two parts / one stream throughput = {ratio:.2f}")
    print(f"  RATIO two parts / cp throughput = {cp_seconds / statistics.median(times['two parts']):.2f}")


if __name__ == "__main__":
    main()
