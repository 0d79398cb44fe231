"""A reservation's whole path in Debian's Chromium on the real cluster: a user requests at
phone width in their own time zone, an admin approves on the queue (Slurm then holds the
GPUs), the user sees it approved and, once the clock reaches its start, active."""

import re
from datetime import UTC, datetime, time, timedelta
from urllib.parse import quote
from zoneinfo import ZoneInfo

import pytest
from django.utils import timezone

from cluster.actions.mirror import mirror_nodes
from cluster.clusters.services import slurm_cli
from reservations import actions
from reservations.models import Reservation, State
from testing.browser import log_in
from testing.servers import CHROMIUM_ARGS, CHROMIUM_PATH, portal_stack

playwright_api = pytest.importorskip("playwright.sync_api")
expect = playwright_api.expect

pytestmark = [
    pytest.mark.browser,
    pytest.mark.slurm,
    pytest.mark.first_release,
    pytest.mark.django_db(transaction=True),
]

# A zone with a half-hour offset and no daylight saving: a start read in the wrong zone
# cannot land on the right UTC moment by chance.
ZONE = "Asia/Kolkata"


def test_request_approve_and_see_it_active(alice, admin_user, provision, slurm, tmp_path):
    mirror_nodes(slurm)  # capacity comes from the node mirror
    cluster_name = provision(alice).cluster_username
    # Three days ahead at 08:30 in the user's zone: on the grid, in the future, within the horizon.
    local_day = (timezone.now() + timedelta(days=3)).astimezone(ZoneInfo(ZONE)).date()
    expected_start = datetime.combine(local_day, time(8, 30), tzinfo=ZoneInfo(ZONE)).astimezone(UTC)
    slurm_names = []
    try:
        with playwright_api.sync_playwright() as playwright, portal_stack() as base_url:
            browser = playwright.chromium.launch(executable_path=CHROMIUM_PATH, args=CHROMIUM_ARGS)
            try:
                phone = {"width": 390, "height": 844}
                page = browser.new_context(viewport=phone, timezone_id=ZONE).new_page()
                errors = []
                page.on("pageerror", lambda error: errors.append(error))
                log_in(page, base_url, "alice", "pw-alice")

                # The request starts on the calendar: a free hour's link fills in type and start
                # (the week's table is for wider screens; phones get a list per day).
                page.set_viewport_size({"width": 1280, "height": 900})
                page.goto(f"{base_url}/reservations/calendar/?gpu_type=rtx4090&week={expected_start.date()}")
                slot = expected_start.replace(minute=0).isoformat()
                page.locator(f'a[data-reserve-slot][href*="{quote(slot)}"]').click()
                page.wait_for_url(re.compile(r".*/reservations/new/\?.*"))
                page.set_viewport_size(phone)
                # Chromium's ICU names the zone by its older alias.
                expect(page.locator("[data-tz-label]")).to_have_text(re.compile(r"Asia/(Kolkata|Calcutta)"))
                assert page.input_value("#id_gpu_type") == "rtx4090"
                # The slot's UTC hour (03:00), shown in the user's zone (UTC+05:30).
                assert page.input_value("#id_start_date") == local_day.isoformat()
                assert page.input_value("#id_start_time") == "08:30"
                page.fill("#id_gpu_count", "1")
                page.fill("#id_duration_minutes", "60")
                page.fill("#id_purpose", "a browser test's reservation")
                expect(page.locator("[data-availability-text]")).to_contain_text("Free:", timeout=15000)
                expect(page.locator("[data-checking]")).to_be_hidden()
                # The window's price, and what Pro's hours and credits cover of it (Pro includes no
                # RTX 4090 hours, and alice has no credits).
                expect(page.locator("[data-quote]")).to_contain_text("$", timeout=15000)
                expect(page.locator("[data-quote]")).to_contain_text("Nothing of it is covered by your plan or credits")
                page.screenshot(path=str(tmp_path / "request-phone.png"), full_page=True)
                page.click("[data-submit]")
                page.wait_for_url(re.compile(r".*/reservations/\d+/$"))
                reservation = Reservation.objects.get(user=alice)
                slurm_names.append(reservation.slurm_reservation_name())
                assert reservation.start == expected_start
                assert (reservation.gpu_type, reservation.gpu_count, reservation.duration_minutes) == ("rtx4090", 1, 60)
                expect(page.locator("h1 [data-state]")).to_have_text("requested")

                admin = browser.new_context(viewport=phone).new_page()
                log_in(admin, base_url, "ada", "pw-ada")
                admin.goto(f"{base_url}/reservations/queue/")
                item = admin.locator(f'[data-reservation="{reservation.pk}"]')
                expect(item.locator("[data-capacity]")).to_contain_text("of 8 free")
                admin.screenshot(path=str(tmp_path / "queue-phone.png"), full_page=True)
                item.locator("[data-approve]").click()
                admin.wait_for_url(re.compile(r".*/reservations/queue/$"))
                expect(admin.locator(".messages")).to_contain_text(f"Reservation #{reservation.pk} approved")
                reservation.refresh_from_db()
                assert reservation.state == State.APPROVED, reservation.error
                held = slurm_cli().show_reservation(reservation.slurm_name)
                assert held is not None and "gres/gpu:rtx4090=1" in held.tres
                assert held.users == (cluster_name,)

                page.goto(f"{base_url}/reservations/")
                expect(page.locator("[data-notices]")).to_contain_text("approved by ada")
                expect(page.locator(f'[data-reservation="{reservation.pk}"] [data-state]')).to_have_text("approved")

                assert actions.advance(now=reservation.start) == 1
                page.goto(f"{base_url}/reservations/{reservation.pk}/")
                expect(page.locator("h1 [data-state]")).to_have_text("active")
                expect(page.locator(".events")).to_contain_text("by the clock")
                page.goto(f"{base_url}/reservations/calendar/?gpu_type=rtx4090&week={expected_start.date()}")
                expect(page.locator(".cal-days [data-kind=own]").first).to_contain_text(f"#{reservation.pk}")
                page.screenshot(path=str(tmp_path / "calendar-phone.png"), full_page=True)
                assert errors == []
            finally:
                browser.close()
    finally:
        cli = slurm_cli()
        for name in slurm_names:
            cli.delete_reservation(name, check=False)
