"""Job states and Slurm's reasons in words a researcher knows, Slurm's term kept as a detail;
jobs named by the portal's id (Slurm's ids repeat across clusters)."""

import pytest
from django.test import Client

from jobs.diagnosis.reasons import explain_reason, short_reason
from jobs.live.events import job_payload
from jobs.models import Job

pytestmark = pytest.mark.django_db


def test_a_reason_is_a_sentence_and_a_short_clause_and_an_unknown_one_is_named_as_slurms():
    assert explain_reason("JobArrayTaskLimit").startswith("Waiting for its turn")
    assert short_reason("Resources") == "Waiting for GPUs"
    assert short_reason("QOSMaxGRESPerUser") == "Your plan's limit of GPUs in use at once is reached"
    assert explain_reason("SomethingNew") == "Slurm gives the reason “SomethingNew”."
    assert explain_reason("None") == "" and short_reason("") == ""


def test_the_jobs_table_says_states_and_reasons_in_words_with_slurms_terms_as_details(alice):
    waiting = Job.objects.create(
        owner=alice, name="waits", slurm_job_id=2, state="PENDING", state_reason="JobArrayTaskLimit"
    )
    timed_out = Job.objects.create(
        owner=alice, name="ran-long", slurm_job_id=3, state="TIMEOUT", state_reason="TimeLimit"
    )
    browser = Client()
    browser.force_login(alice)
    page = browser.get("/jobs/").content.decode()
    assert "Waiting for its turn" in page and "(Slurm: JobArrayTaskLimit)" in page
    assert 'title="TIMEOUT">Time limit reached<' in page and ">TIMEOUT<" not in page
    assert ">JobArrayTaskLimit<" not in page
    # The portal's id links the job; Slurm's id is a detail beside it.
    assert f'href="/jobs/{waiting.pk}/">#{waiting.pk}</a>' in page
    assert f'href="/jobs/{timed_out.pk}/">#{timed_out.pk}</a>' in page
    payload = job_payload(timed_out)
    assert (
        payload["state_label"] == "Time limit reached"
        and payload["reason_short"] == "The job ran out of its time limit"
    )


def test_the_job_form_is_the_users_and_the_admins_not_marketings(alice, admin_user, marketer):
    for person, status in ((marketer, 403), (alice, 200), (admin_user, 200)):
        browser = Client()
        browser.force_login(person)
        assert browser.get("/jobs/new/").status_code == status, person.username
        if status == 403:
            assert browser.post("/jobs/new/", {"name": "x"}).status_code == 403
