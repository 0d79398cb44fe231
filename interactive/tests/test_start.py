"""Starting a session: what is refused (and then nothing is written), how the server's port is
read, and a server that never answers."""

from datetime import timedelta

import pytest
from django.utils import timezone

from interactive.actions.starting import check_start, port_from_output
from interactive.kinds import JUPYTERLAB, PORT_LINE
from interactive.models import InteractiveSession, SessionState
from jobs.models import Job, JobState


@pytest.mark.pure
def test_the_port_is_the_first_port_line_within_range():
    assert port_from_output(f"[gpupool] job x\n{PORT_LINE}41234\n{PORT_LINE}5000\n") == 41234
    assert port_from_output(f"{PORT_LINE}80\n") is None  # a privileged port is no server of ours
    assert port_from_output(f"{PORT_LINE}70000\n") is None
    assert port_from_output(f"{PORT_LINE}12a\n") is None
    assert port_from_output("nothing yet") is None


@pytest.mark.pure
def test_the_command_is_the_portals_and_reads_the_token_from_the_environment():
    assert "JUPYTER_TOKEN" not in JUPYTERLAB.command  # jupyter_server reads it itself
    assert "--ServerApp.token" not in JUPYTERLAB.command  # never on a command line (ps shows those)
    assert "--port-retries=0" in JUPYTERLAB.command


@pytest.mark.django_db
@pytest.mark.parametrize(
    "changes, field",
    [
        ({"command": "rm -rf ~"}, "command"),
        ({"spot": True}, "spot"),
        ({"kind": "emacs"}, "kind"),
        ({"kind": None}, "kind"),
        ({"image": "nvcr.io/nvidia/cuda:12.4.1-cudnn-runtime-ubuntu22.04"}, "image"),  # no JupyterLab in it
        ({"gpu_count": 99}, "gpu_count"),
    ],
)
def test_a_refused_session_names_the_field_and_writes_nothing(alice, api_client_for, changes, field):
    body = {
        "kind": "jupyterlab",
        "image": "nvcr.io/nvidia/pytorch:24.05-py3",
        "gpu_type": "rtx4090",
        "gpu_count": 1,
        "time_limit_minutes": 30,
    }
    body.update(changes)
    response = api_client_for(alice).post(
        "/api/v1/sessions/", {k: v for k, v in body.items() if v is not None}, format="json"
    )
    assert response.status_code == 400, response.content
    assert field in response.data["errors"]
    assert not Job.objects.exists() and not InteractiveSession.objects.exists()


@pytest.mark.django_db
def test_an_unprovisioned_user_hears_so_and_nothing_is_written(alice, api_client_for):
    body = {"kind": "jupyterlab", "image": "nvcr.io/nvidia/pytorch:24.05-py3", "gpu_type": "rtx4090", "gpu_count": 1}
    response = api_client_for(alice).post("/api/v1/sessions/", {**body, "time_limit_minutes": 30}, format="json")
    assert response.status_code == 409 and "cluster account" in response.data["detail"]
    assert not Job.objects.exists() and not InteractiveSession.objects.exists()


@pytest.mark.django_db
def test_a_server_that_never_answers_fails_the_session_with_a_reason(alice, settings):
    settings.SESSION_START_TIMEOUT_SECONDS = 60
    job = Job.objects.create(
        owner=alice, state=JobState.RUNNING, name="lab", start_time=timezone.now() - timedelta(seconds=30)
    )
    session = InteractiveSession.objects.create(job=job, owner=alice, kind="jupyterlab", address="127.0.0.1", port=1)
    assert check_start(session.pk) == "starting"
    Job.objects.filter(pk=job.pk).update(start_time=timezone.now() - timedelta(seconds=61))
    assert check_start(session.pk) == "failed"
    session = InteractiveSession.objects.select_related("job").get(pk=session.pk)
    assert "did not answer within 1 minutes" in session.error
    assert session.state == SessionState.FAILED
    assert check_start(session.pk) == "failed"  # once failed, stays so


@pytest.mark.django_db
def test_other_users_and_roles_see_nothing_of_a_session(alice, bob, admin_user, marketer, client, api_client_for):
    job = Job.objects.create(owner=alice, state=JobState.PENDING, name="alices-lab")
    session = InteractiveSession.objects.create(job=job, owner=alice, kind="jupyterlab")
    for other in (bob, admin_user, marketer):
        assert api_client_for(other).get(f"/api/v1/sessions/{session.pk}/").status_code == 404
        assert api_client_for(other).post(f"/api/v1/sessions/{session.pk}/stop").status_code == 404
        assert session.pk not in [row["id"] for row in api_client_for(other).get("/api/v1/sessions/").data["results"]]
        client.force_login(other)
        assert client.get(f"/sessions/{session.pk}/").status_code == 404
        assert client.get(f"/sessions/open/{session.host_key}/").status_code == 404
        assert "alices-lab" not in client.get("/sessions/").content.decode()
    client.force_login(alice)
    page = client.get(f"/sessions/{session.pk}/").content.decode()
    assert "alices-lab" in page and "Waiting for a GPU" in page
    assert f'href="/jobs/{session.job_id}/files/"' in page  # the session's directory, as a job's
    opened = client.get(f"/sessions/open/{session.host_key}/")
    assert opened.status_code == 302 and "/_gpupool/open?ticket=" in opened["Location"]


@pytest.mark.django_db
def test_a_session_saved_as_a_template_starts_the_next_one_and_stays_off_the_job_form(alice, client):
    from jobs.models import JobTemplate

    spec = {"name": "lab", "image": "nvcr.io/nvidia/pytorch:24.05-py3", "gpu_type": "rtx4090", "gpu_count": 2}
    template = JobTemplate.objects.create(owner=alice, name="two-gpus", spec=spec, kind="jupyterlab")
    JobTemplate.objects.create(owner=alice, name="a-job", spec={"command": "x"})
    client.force_login(alice)
    form = client.get("/sessions/new/").content.decode()
    assert "the template two-gpus" in form and "the template a-job" not in form
    assert "two-gpus" not in client.get("/jobs/new/").content.decode()
    filled = client.get(f"/sessions/new/?template={template.pk}").content.decode()
    assert 'name="gpu_count" inputmode="numeric" value="2"' in filled
    assert client.get(f"/jobs/new/?template={template.pk}").status_code == 404
    gone = client.post(f"/jobs/templates/{template.pk}/delete", {"next": "/sessions/new/"})
    assert gone.status_code == 302 and gone["Location"] == "/sessions/new/"
    assert not JobTemplate.objects.filter(pk=template.pk).exists()
    away = client.post(
        f"/jobs/templates/{JobTemplate.objects.get(name='a-job').pk}/delete", {"next": "https://evil.example/"}
    )
    assert away["Location"] == "/jobs/new/"


@pytest.mark.django_db
def test_a_stop_slurm_did_not_take_leaves_the_session_running_and_says_why(alice, client):
    # In Slurm (RUNNING) but its id not known yet: jobs.actions.cancel refuses ("try again").
    job = Job.objects.create(owner=alice, state=JobState.RUNNING, name="lab")
    session = InteractiveSession.objects.create(job=job, owner=alice, kind="jupyterlab", ready_at=timezone.now())
    client.force_login(alice)
    page = client.post(f"/sessions/{session.pk}/stop", follow=True).content.decode()
    assert "not in Slurm yet" in page
    session.refresh_from_db()
    assert session.stop_reason == "" and session.state == SessionState.READY
