"""The driver/container check: each image's needed driver against the driver the nodes of a GPU
type reported (jobs/drivers.py), on the API, in the job form, and from the dev cluster's emulator."""

from datetime import timedelta

import pytest
from django.conf import settings
from django.utils import timezone

from cluster.models import Node
from jobs.drivers import driver_warning, drivers_by_gpu_type

pytestmark = pytest.mark.django_db
NEEDS_550 = "nvcr.io/nvidia/pytorch:24.05-py3"  # min_driver 550.54 in deploy/images.json


def _node(name, gpu_type, driver, *, age=timedelta(0), source="nvml"):
    return Node.objects.create(
        name=name,
        state="IDLE",
        gpus=[{"type": gpu_type, "count": 4}],
        driver_version=driver,
        driver_source=source if driver else "",
        driver_reported_at=timezone.now() - age if driver else None,
    )


def _image(reference):
    return next(image for image in settings.IMAGE_CATALOGUE.images if image.reference == reference)


def test_the_oldest_fresh_report_of_a_type_counts():
    _node("a1", "a100", "550.54.15")
    _node("a2", "a100", "535.104.05")
    _node("a3", "a100", "470.1", age=timedelta(days=3))  # stale: upgraded since, perhaps
    _node("a4", "a100", "")
    _node("h1", "h100", "560.28.03")
    drivers = drivers_by_gpu_type()
    assert drivers["a100"] == {"oldest": "535.104.05", "reporting": 2, "nodes": 4, "source": "nvml"}
    assert drivers["h100"]["oldest"] == "560.28.03"
    image = _image(NEEDS_550)
    assert "needs NVIDIA driver 550.54 or newer" in driver_warning(image, "a100", drivers)
    assert "a100 nodes run 535.104.05" in driver_warning(image, "a100", drivers)
    assert driver_warning(image, "h100", drivers) == ""
    assert driver_warning(image, "rtx4090", drivers) == ""  # nothing reported: no claim either way


def test_the_images_api_compares_each_image_with_a_gpu_types_driver(alice, api_client_for):
    _node("a1", "a100", "535.104.05")
    client = api_client_for(alice)
    images = {i["reference"]: i for i in client.get("/api/v1/images/", {"gpu_type": "a100"}).json()}
    assert images[NEEDS_550]["host_driver"] == "535.104.05" and images[NEEDS_550]["driver_too_old"] is True
    older = next(i for i in images.values() if i["min_driver"] and i["min_driver"] < "535")
    assert older["driver_too_old"] is False
    plain = client.get("/api/v1/images/").json()
    assert all(i["host_driver"] == "" and i["driver_too_old"] is None for i in plain)
    refused = client.get("/api/v1/images/", {"gpu_type": "v100; drop"})
    assert refused.status_code == 400 and "gpu_type" in refused.json()["errors"]


def test_the_emulator_states_its_driver_as_the_emulators(settings):
    from telemetry.tasks import emulate_telemetry

    settings.TELEMETRY_EMULATOR = True
    settings.TELEMETRY_EMULATOR_DRIVER = "545.23.08"
    _node("gpu-a100-01", "a100", "")
    emulate_telemetry()
    node = Node.objects.get()
    assert (node.driver_version, node.driver_source) == ("545.23.08", "emulator")
    assert drivers_by_gpu_type()["a100"]["source"] == "emulator"


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_the_job_form_warns_beside_the_image_when_the_nodes_driver_is_too_old(alice):
    playwright_api = pytest.importorskip("playwright.sync_api")
    from testing.browser import chromium_page, log_in
    from testing.servers import portal_stack

    _node("a1", "a100", "535.104.05")
    _node("r1", "rtx4090", "560.28.03")
    with portal_stack() as base_url, chromium_page(playwright_api, width=390, height=844) as page:
        log_in(page, base_url, "alice", "pw-alice")
        page.goto(f"{base_url}/jobs/new/")
        note = page.locator("[data-image-driver]")
        page.select_option("#id_gpu_type", "a100")
        page.fill("#id_image", NEEDS_550)
        playwright_api.expect(note).to_have_attribute("data-mismatch", "1")
        playwright_api.expect(note).to_contain_text("a100 nodes run driver 535.104.05")
        playwright_api.expect(note).to_contain_text("older than this image needs")
        page.select_option("#id_gpu_type", "rtx4090")  # alice's plan has rtx4090 and a100
        playwright_api.expect(note).to_have_attribute("data-mismatch", "0")
        playwright_api.expect(note).to_contain_text("rtx4090 nodes run driver 560.28.03")
        assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
        # The spot option's checkpointing example, opened, still fits the phone's width.
        page.click("[data-spot-example] summary")
        playwright_api.expect(page.locator("[data-spot-example] pre").first).to_be_visible()
        assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
