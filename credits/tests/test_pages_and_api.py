"""Who sees what: a user's own credits (page, dashboard, API), marketing's campaigns (pages,
CSV, API), and 403 for everyone else."""

import csv
import io
from datetime import timedelta
from decimal import Decimal

import pytest
from django.template import Context, Template
from django.test import Client

from audit.models import AuditLog
from credits.actions import grants, ledger
from credits.models import Campaign, Enrollment, GrantKind
from jobs.models import Job, JobState

pytestmark = pytest.mark.django_db


def _client(user):
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def spring(marketer):
    return Campaign.objects.create(name="Spring", code="spring", start="2020-01-01T00:00Z", created_by=marketer)


def _member_with_credits(user, campaign):
    grants.enroll(user, campaign=campaign)
    grants.email_verified(user.pk)
    ledger.spend(user.pk, 1000, gpu_type="rtx4090", idempotency_key=f"usage:{user.pk}")


def test_the_credits_page_and_dashboard_show_ones_own_balance(alice, bob):
    ledger.grant(alice.pk, 1234, key="a", grant_kind="signup", campaign_id=grants.default_campaign().pk)
    ledger.grant(bob.pk, 999, key="b", grant_kind="signup", campaign_id=grants.default_campaign().pk)
    page = _client(alice).get("/credits/")
    assert page.status_code == 200
    assert b"1,234" in page.content and b"999" not in page.content
    assert page.context["referral_link"].endswith(f"/r/welcome?ref={ledger.account_for(alice.pk).referral_code}")
    assert b"1,234" in _client(alice).get("/").content


def test_credit_past_its_expiry_is_never_shown_as_spendable(alice, settings):
    import time_machine
    from django.utils import timezone

    ledger.grant(alice.pk, 1234, key="a", grant_kind="signup", campaign_id=grants.default_campaign().pk)
    with time_machine.travel(timezone.now() + timedelta(days=settings.CREDIT_EXPIRY_DAYS, minutes=1)):
        # The dashboard's tile reads only: the beat task has not written the credit off yet.
        assert b"1,234" not in _client(alice).get("/").content
        assert ledger.spendable_balance(alice.pk) == 0 and ledger.balance(alice.pk) == 1234
        # The credits page writes it off first, so its balance is the sum of the entries shown.
        page = _client(alice).get("/credits/")
        assert page.context["balance"] == 0 == ledger.sum_of_entries(alice.pk)
        assert [entry.kind for entry in page.context["entries"]] == ["expiry", "grant"]


def test_the_credits_api_returns_balance_and_signed_entries(alice, bob):
    campaign = grants.default_campaign()
    ledger.grant(alice.pk, 500, key="a", grant_kind="signup", campaign_id=campaign.pk)
    ledger.spend(alice.pk, 100, gpu_type="a100", idempotency_key="usage:1")
    ledger.grant(bob.pk, 77, key="b", grant_kind="signup", campaign_id=campaign.pk)
    body = _client(alice).get("/api/v1/credits/").json()
    assert body["balance"] == 500 - 313
    assert [(e["kind"], e["amount"]) for e in body["entries"]] == [("spend", -313), ("grant", 500)]
    assert body["entries"][1]["expires_at"] and body["entries"][0]["expires_at"] is None
    assert body["balance"] == sum(e["amount"] for e in body["entries"]) == ledger.sum_of_entries(alice.pk)
    assert Client().get("/api/v1/credits/").status_code in (401, 403)


def test_campaigns_api_is_for_marketing(alice, admin_user, marketer):
    body = {"name": "Autumn", "code": "autumn", "start": "2026-09-01T00:00:00Z", "end": "2026-10-01T00:00:00Z",
            "budget_gpu_seconds": 1_000_000, "per_referrer_cap": 5}  # fmt: skip
    for outsider in (alice, admin_user):
        assert _client(outsider).get("/api/v1/campaigns/").status_code == 403
        assert _client(outsider).post("/api/v1/campaigns/", body, content_type="application/json").status_code == 403
    assert not Campaign.objects.filter(code="autumn").exists()
    created = _client(marketer).post("/api/v1/campaigns/", body, content_type="application/json")
    assert created.status_code == 201, created.content
    assert (created.json()["signup_gpu_seconds"], created.json()["tutorial_gpu_seconds"]) == (5000, 10000)
    assert created.json()["referral_gpu_seconds"] == 5000 and created.json()["link"].endswith("/r/autumn")
    listed = _client(marketer).get("/api/v1/campaigns/").json()["results"]
    assert "autumn" in [row["code"] for row in listed]


def test_a_bad_campaign_is_refused_by_field_and_changes_nothing(marketer):
    bad = {"name": "X", "code": "Not A Code", "start": "2026-09-01T00:00:00Z", "end": "2026-08-01T00:00:00Z"}
    response = _client(marketer).post("/api/v1/campaigns/", bad, content_type="application/json")
    assert response.status_code == 400
    assert set(response.json()["errors"]) >= {"code"}
    assert not Campaign.objects.filter(name="X").exists()


def test_marketing_pages_answer_403_to_others(alice, admin_user, spring):
    for outsider in (alice, admin_user):
        client = _client(outsider)
        for path in ("/marketing/campaigns/", f"/marketing/campaigns/{spring.pk}/", "/marketing/review/",
                     f"/marketing/campaigns/{spring.pk}/members.csv"):  # fmt: skip
            assert client.get(path).status_code == 403, path


def test_the_campaign_page_shows_figures_and_members_but_no_job_names(marketer, spring, alice, bob):
    _member_with_credits(alice, spring)
    Job.objects.create(owner=alice, name="secret-experiment", state=JobState.COMPLETED, exit_code=0)
    page = _client(marketer).get(f"/marketing/campaigns/{spring.pk}/")
    assert page.status_code == 200
    totals = page.context["totals"]
    assert (totals.signups, totals.verified, totals.granted, totals.spent, totals.outstanding) == (
        1,
        1,
        5000,
        1000,
        4000,
    )
    # RTX 4090 list price $0.00048/s: 4,000 credits outstanding are $1.92.
    assert page.context["liability"] == Decimal("1.92")
    assert b"alice" in page.content and b"secret-experiment" not in page.content
    assert b"7-day retention" in page.content and b"days 1 to 7" in page.content


def test_every_table_has_a_csv(marketer, spring, alice):
    _member_with_credits(alice, spring)
    client = _client(marketer)
    rows = list(csv.reader(io.StringIO(client.get("/marketing/campaigns/?format=csv").content.decode())))
    spring_row = next(row for row in rows if row[0] == "spring")
    assert spring_row[rows[0].index("granted")] == "5000" and spring_row[rows[0].index("liability_usd")] == "1.92"
    for table in ("days", "retention", "members"):
        response = client.get(f"/marketing/campaigns/{spring.pk}/{table}.csv")
        assert response.status_code == 200 and response["Content-Type"].startswith("text/csv")
    members = list(
        csv.reader(io.StringIO(client.get(f"/marketing/campaigns/{spring.pk}/members.csv").content.decode()))
    )
    assert [row[0] for row in members[1:]] == ["alice"]
    assert client.get("/marketing/review/?format=csv").status_code == 200
    assert client.get(f"/marketing/campaigns/{spring.pk}/invoices.csv").status_code == 404


def test_retention_counts_a_job_on_days_1_to_7_only(marketer, spring, alice, bob):
    for user in (alice, bob):
        grants.enroll(user, campaign=spring)
    signed_up = Enrollment.objects.get(user=alice).signed_up_at
    Job.objects.create(owner=alice, state=JobState.COMPLETED)
    Job.objects.filter(owner=alice).update(created_at=signed_up + timedelta(days=3))
    Job.objects.create(owner=bob, state=JobState.COMPLETED)  # on the day of sign-up: not retention
    rows = _client(marketer).get(f"/marketing/campaigns/{spring.pk}/").context["retention"]
    assert [(row["signups"], row["kept"], row["share"]) for row in rows] == [(2, 1, Decimal("50.0"))]


def test_marketing_creates_a_campaign_on_the_console(marketer):
    response = _client(marketer).post(
        "/marketing/campaigns/",
        {
            "name": "Launch",
            "code": "launch",
            "start": "2026-01-01T00:00",
            "signup_gpu_seconds": 6000,
            "tutorial_gpu_seconds": 10000,
            "referral_gpu_seconds": 5000,
            "budget_gpu_seconds": 1_000_000,
            "per_referrer_cap": 5,
        },  # fmt: skip
    )
    assert response.status_code == 302
    assert Campaign.objects.get(code="launch").signup_gpu_seconds == 6000
    assert AuditLog.objects.filter(action="credits.campaign.create", actor=marketer).exists()


def test_the_job_credit_use_include_lists_the_jobs_spends(alice):
    ledger.grant(alice.pk, 5000, key="a", grant_kind="signup", campaign_id=grants.default_campaign().pk)
    job = Job.objects.create(owner=alice, state=JobState.COMPLETED)
    ledger.spend(alice.pk, 120, gpu_type="a100", idempotency_key="usage:j", reference=ledger.job_reference(job.uuid))
    ledger.spend(alice.pk, 50, gpu_type="a100", idempotency_key="usage:other")
    html = Template("{% load credits_tags %}{% job_credit_use job %}").render(Context({"job": job}))
    assert "375 credits covered 120 GPU-seconds" in html


@pytest.mark.parametrize(
    "change, field",
    [
        ({"budget_gpu_seconds": ""}, "budget_gpu_seconds"),
        ({"per_referrer_cap": ""}, "per_referrer_cap"),
        ({"signup_gpu_seconds": 50_001}, "signup_gpu_seconds"),
        ({"referral_gpu_seconds": 10_000_000}, "referral_gpu_seconds"),
        ({"budget_gpu_seconds": 10**15}, "budget_gpu_seconds"),  # accepted once: no upper bound
        ({"per_referrer_cap": 1_000_000}, "per_referrer_cap"),
    ],
)
def test_a_campaign_without_a_budget_or_cap_or_with_a_huge_grant_is_refused(marketer, change, field):
    values = {
        "name": "Leaky", "code": "leaky", "start": "2026-01-01T00:00", "signup_gpu_seconds": 5000,
        "tutorial_gpu_seconds": 10000, "referral_gpu_seconds": 5000, "budget_gpu_seconds": 100000,
        "per_referrer_cap": 3,
    }  # fmt: skip
    page = _client(marketer).post("/marketing/campaigns/", {**values, **change})
    assert page.status_code == 200 and field in page.context["form"].errors
    body = {key: (None if value == "" else value) for key, value in {**values, **change}.items()}
    body["start"] = "2026-01-01T00:00:00Z"
    refused = _client(marketer).post("/api/v1/campaigns/", body, content_type="application/json")
    assert refused.status_code == 400 and field in str(refused.json()), refused.content
    assert not Campaign.objects.filter(code="leaky").exists()


def test_the_credits_page_stops_offering_a_paid_tutorial_and_shows_held_grants(alice):
    from credits.models import GrantKind, HeldGrant

    page = _client(alice).get("/credits/").content.decode()
    assert "Run the <a" in page and "data-tutorial-paid" not in page and "data-held-grant" not in page
    campaign_id = grants.default_campaign().pk
    ledger.grant(alice.pk, 10000, key=f"tutorial:{alice.pk}", grant_kind="tutorial", campaign_id=campaign_id)
    HeldGrant.objects.create(
        user=alice, campaign=grants.default_campaign(), grant_kind=GrantKind.REFERRAL_INVITEE, amount=5000,
        idempotency_key=f"referral:invitee:{alice.pk}", reference=f"invitee:{alice.pk}", reason="same browser",
    )  # fmt: skip
    page = _client(alice).get("/credits/").content.decode()
    assert "data-tutorial-paid" in page and "Run the <a" not in page
    assert "5,000 credits (invitee referral) wait for a review" in page
    assert "same browser" not in page  # the reason for the hold is marketing's, not shown


def test_a_large_budget_grants_nothing_until_a_second_marketer_approves_it(marketer, django_user_model, settings):
    from accounts.models import Role
    from credits.actions import grants

    settings.CAMPAIGN_APPROVAL_GPU_SECONDS = 1_000_000
    body = {
        "name": "Big", "code": "big", "start": "2026-01-01T00:00:00Z", "budget_gpu_seconds": 2_000_000,
        "per_referrer_cap": 3,
    }  # fmt: skip
    made = _client(marketer).post("/api/v1/campaigns/", body, content_type="application/json")
    assert made.status_code == 201 and made.json()["needs_approval"] and made.json()["approved_at"] is None
    campaign = Campaign.objects.get(code="big")
    assert "second marketer's approval" in campaign.closed_reason()
    # Nothing is granted meanwhile: a sign-up into it gets no credits, and says why.
    refused = grants._campaign_grant(marketer.pk, campaign.pk, "signup", 5000, "signup:test-big")
    assert refused.status == "refused" and "approval" in refused.detail
    own = _client(marketer).post(f"/api/v1/campaigns/{campaign.pk}/approve", content_type="application/json")
    assert own.status_code == 409 and "another marketer" in own.json()["detail"]
    second = django_user_model.objects.create_user("mara", "mara@x.org", "pw-mara")
    second.profile.role = Role.MARKETING
    second.profile.save()
    page = _client(second).get(f"/marketing/campaigns/{campaign.pk}/").content.decode()
    assert "data-approve-campaign" in page and "starts granting at once" in page
    approved = _client(second).post(f"/api/v1/campaigns/{campaign.pk}/approve", content_type="application/json")
    assert approved.status_code == 200 and approved.json()["approved_at"]
    campaign.refresh_from_db()
    assert campaign.closed_reason() == "" and campaign.approved_by == second
    assert AuditLog.objects.filter(action="credits.campaign.approve", actor=second).exists()
    again = _client(second).post(f"/api/v1/campaigns/{campaign.pk}/approve", content_type="application/json")
    assert again.status_code == 409
    # A small budget needs nobody.
    small = _client(marketer).post("/api/v1/campaigns/", {**body, "code": "small", "budget_gpu_seconds": 10_000},
                                   content_type="application/json")  # fmt: skip
    assert small.status_code == 201 and not small.json()["needs_approval"]


def test_grants_read_as_what_they_are_for_not_as_codes(alice):
    campaign = grants.default_campaign()
    ledger.grant(alice.pk, 5000, key="words-invitee", grant_kind=GrantKind.REFERRAL_INVITEE, campaign_id=campaign.pk)
    page = _client(alice).get("/credits/").content.decode()
    assert "For joining through a friend" in page
    assert "Grant (" not in page and "(invitee)" not in page
    assert "Welcome credits" in page and "no campaign link" not in page
