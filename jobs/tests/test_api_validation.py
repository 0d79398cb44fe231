"""Bad input is a 400 naming the field, and changes nothing: no row, no Slurm job."""

import io
import json

import pytest

from jobs.models import Job
from jobs.tests.conftest import GOOD_SPEC

pytestmark = pytest.mark.django_db

METACHARACTERS = "; rm -rf / && $(id) `id` | > /etc/passwd"

BAD_INPUTS = [
    ("image", {"image": "nvcr.io/nvidia/pytorch:24.05\n#SBATCH --uid=0"}),
    ("image", {"image": "nvcr.io/nvidia/pytorch:latest"}),
    ("image", {"image": "nvcr.io/nvidia/pytorch"}),
    ("image", {"image": "pytorch/pytorch:2.3" + METACHARACTERS}),
    ("gpu_type", {"gpu_type": "v100"}),
    ("gpu_type", {"gpu_type": "a100" + METACHARACTERS}),
    ("gpu_count", {"gpu_count": 9}),
    ("gpu_count", {"gpu_count": 0}),
    ("gpu_memory_gb", {"gpu_count": None, "gpu_memory_gb": 41}),
    ("time_limit_minutes", {"time_limit_minutes": -5}),
    ("time_limit_minutes", {"time_limit_minutes": 10**12}),
    ("time_limit_minutes", {"time_limit_minutes": "60; reboot"}),
    ("name", {"name": "x" + METACHARACTERS}),
    ("data_mount", {"data_mount": "/mnt/nvme/../../etc" + METACHARACTERS}),
    ("data_mount", {"data_mount": "/etc/shadow"}),
    ("environment", {"environment": {"LD_PRELOAD": "/tmp/x.so"}}),
    ("environment", {"environment": {"BAD NAME;": "x"}}),
    # One byte over the spec's 64 KiB: under the API's body cap, so the spec names the field.
    ("command", {"command": "x" * (64 * 1024 + 1)}),
    ("command", {"command": "   "}),
]


@pytest.mark.parametrize("field, change", BAD_INPUTS, ids=[f"{field}-{i}" for i, (field, _) in enumerate(BAD_INPUTS)])
def test_bad_input_is_a_400_naming_the_field(alice, api_client_for, field, change):
    alice.profile.cluster_username = "alice"
    alice.profile.save()
    body = {key: value for key, value in {**GOOD_SPEC, **change}.items() if value is not None}
    response = api_client_for(alice).post("/api/v1/jobs/", body, format="json")
    assert response.status_code == 400, response.content
    assert field in response.json()["errors"], response.json()
    assert Job.objects.count() == 0


@pytest.mark.slurm
def test_bad_inputs_never_reach_slurm(alice, api_client_for, provision, slurm):
    profile = provision(alice)
    client = api_client_for(alice)

    def slurm_jobs_of_alice():
        return [job for job in slurm.list_jobs() if job.user_name == profile.cluster_username]

    for _field, change in BAD_INPUTS:
        body = {key: value for key, value in {**GOOD_SPEC, **change}.items() if value is not None}
        assert client.post("/api/v1/jobs/submit", body, format="json").status_code == 400
    assert slurm_jobs_of_alice() == []
    assert Job.objects.count() == 0


def test_an_unknown_field_is_reported(alice, api_client_for):
    response = api_client_for(alice).post("/api/v1/jobs/", {**GOOD_SPEC, "gpu_cont": 2}, format="json")
    assert response.status_code == 400
    assert "gpu_cont" in response.json()["errors"]


def _provisioned(user):
    user.profile.cluster_username = user.username
    user.profile.provisioned_at = "2026-01-01T00:00:00Z"
    user.profile.save()


@pytest.mark.parametrize("fmt", ["multipart", None])
def test_form_bodies_are_refused_as_unsupported(alice, api_client_for, fmt):
    # JSON only: the schema declares one body type, and a form's values are all strings.
    _provisioned(alice)
    client = api_client_for(alice)
    if fmt is None:
        response = client.post("/api/v1/jobs/", "image=x", content_type="application/x-www-form-urlencoded")
    else:
        response = client.post("/api/v1/jobs/", {**GOOD_SPEC}, format=fmt)
    assert response.status_code == 415
    assert "detail" in response.json()
    assert Job.objects.count() == 0


@pytest.mark.parametrize(
    "field, value",
    [("gpu_count", "1"), ("time_limit_minutes", "60"), ("gpu_count", True), ("image", 5), ("environment", "A=1")],
)
def test_a_json_value_of_the_wrong_type_is_a_400_naming_the_field(alice, api_client_for, field, value):
    # jobs.submission.spec accepts "60" from the job form; the API's schema says a number, so it is one.
    _provisioned(alice)
    response = api_client_for(alice).post("/api/v1/jobs/", {**GOOD_SPEC, field: value}, format="json")
    assert response.status_code == 400
    assert field in response.json()["errors"]
    assert Job.objects.count() == 0


@pytest.mark.parametrize("body", ["[1, 2]", '"a string"', "null", "[" * 100_000])
def test_a_body_that_is_not_an_object_is_a_400(alice, alices_finished_job, api_client_for, body):
    # Nested 100,000 deep is still small JSON, which Python's decoder cannot parse: a 400 too.
    client = api_client_for(alice)
    for path in ["/api/v1/jobs/", f"/api/v1/jobs/{alices_finished_job.pk}/clone"]:
        response = client.post(path, body, content_type="application/json")
        assert response.status_code == 400, (path, response.content[:200])
        assert response.json()["detail"]
    assert Job.objects.count() == 1


@pytest.fixture
def alices_finished_job(alice):
    _provisioned(alice)
    return Job.objects.create(owner=alice, slurm_job_id=8301, state="COMPLETED", spec=dict(GOOD_SPEC))


def test_a_body_over_the_cap_is_a_413_before_it_is_read(alice, api_client_for, settings):
    settings.API_MAX_BODY_BYTES = 2048
    _provisioned(alice)
    client = api_client_for(alice)
    body = json.dumps({**GOOD_SPEC, "command": "x" * 4096})
    response = client.post("/api/v1/jobs/", body, content_type="application/json")
    assert response.status_code == 413
    assert "2048" in response.json()["detail"]
    # The declared length alone is enough: a body that claims to be large is never read.
    unread = UnreadableBody(b"{}")
    response = client.generic(
        "POST", "/api/v1/jobs/", b"", content_type="application/json", CONTENT_LENGTH="999999", **{"wsgi.input": unread}
    )
    assert response.status_code == 413
    assert unread.bytes_read == 0
    assert Job.objects.count() == 0
    # Under the cap, the same request is read and judged on its content.
    settings.API_MAX_BODY_BYTES = 64 * 1024
    assert client.post("/api/v1/jobs/", body, content_type="application/json").status_code == 201


class UnreadableBody(io.BytesIO):
    """A request stream that counts what is read from it."""

    bytes_read = 0

    def read(self, size=-1):
        data = super().read(size)
        self.bytes_read += len(data)
        return data


@pytest.mark.parametrize("page_size", ["0", "201", "-1", "ten", "1.5"])
def test_a_page_size_outside_1_to_200_is_a_400(alice, api_client_for, page_size):
    response = api_client_for(alice).get(f"/api/v1/jobs/?page_size={page_size}")
    assert response.status_code == 400
    assert "page_size" in response.json()["errors"]


def test_a_page_size_within_bounds_sizes_the_page(alice, api_client_for):
    for index in range(3):
        Job.objects.create(owner=alice, slurm_job_id=8400 + index, state="COMPLETED")
    body = api_client_for(alice).get("/api/v1/jobs/?page_size=2").json()
    assert len(body["results"]) == 2 and body["next"]


@pytest.mark.parametrize("method", ["get", "post"])
@pytest.mark.parametrize("path", ["/api/v1/nothing-here", "/api/v1/jobs/0.5/cancel", "/api/v1/jobs/1/2/3"])
def test_an_unknown_api_path_is_a_json_404(alice, api_client_for, method, path):
    from django.test import Client

    for client in [api_client_for(alice), Client(enforce_csrf_checks=True)]:
        response = getattr(client, method)(path)
        assert response.status_code == 404
        assert response["Content-Type"] == "application/json"
        assert response.json()["detail"]
