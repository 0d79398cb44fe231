"""Failures nobody recognised, in front of an admin: ended jobs recorded once, grouped by the
signature of their last error lines, a rule tried on past runs before it is enabled, enabled with
an audit entry and its effect on past and new job pages, exported for the shipped set; users' marks."""

import json

import pytest
from django.test import Client

from audit.models import AuditLog
from failures import actions, queries, tasks
from failures.models import DiagnosisMark, FinishedRun, SiteRule
from failures.site_rules import as_rule
from jobs.diagnosis.contributed import rules_from
from jobs.diagnosis.diagnose import diagnose
from jobs.signals import job_changed

pytestmark = pytest.mark.django_db

SHARD_ERROR = (
    "step 120 loss 2.31\n"
    "Traceback (most recent call last):\n"
    '  File "/home/alice/run{n}/train.py", line 8{n}, in <module>\n'
    "lakefs.ShardIndexCorrupt: shard {n}7 of /data/shards/set{n} has a bad index at 0x{n}f3a\n"
)
# Nothing a rule knows: a made-up library's error, different numbers and paths in each run.
HEALTHY = "epoch 1 loss 2.1\nepoch 2 loss 1.7\nsaved /data/out/model.pt\n"


def _browser(user):
    browser = Client()
    browser.force_login(user)
    return browser


def _record(job):
    return actions.record_finished_job(job.pk)


def _fields(**overrides):
    fields = dict(
        slug="shard-index",
        title="Shard index corrupt",
        cause="A data shard's index is damaged, so the loader stopped.",
        fix="Rebuild the shard index with `lakefs reindex` and resubmit.",
        pattern=r"ShardIndexCorrupt: shard \d+",
        stage=2,
        written_for="",
    )
    fields.update(overrides)
    return actions.RuleFields(**fields)


def test_runs_that_failed_alike_share_a_signature_and_another_failure_does_not(ended_job):
    first = _record(ended_job(SHARD_ERROR.format(n=1)))
    second = _record(ended_job(SHARD_ERROR.format(n=2)))
    other = _record(ended_job("ValueError: the config has no key 'lr'\n"))
    assert first.outcome == second.outcome == "failed"
    assert first.rule_id == second.rule_id == ""  # no rule knows this library
    assert first.signature == second.signature != other.signature
    assert "ShardIndexCorrupt: shard <n> of <path> has a bad index at <hex>" in first.signature_text


def test_recording_is_once_per_job_and_skips_what_is_not_learned_from(ended_job):
    job = ended_job(SHARD_ERROR.format(n=1))
    _record(job)
    _record(job)
    assert FinishedRun.objects.filter(job=job).count() == 1
    assert _record(ended_job(HEALTHY, state="COMPLETED", exit_code=0)).outcome == "healthy"
    assert _record(ended_job(SHARD_ERROR.format(n=3), state="CANCELLED")) is None
    assert _record(ended_job("", state="RUNNING", exit_code=None)) is None


def test_an_ended_job_is_recorded_when_the_mirror_tells_and_the_sweep_catches_what_was_missed(ended_job, eager_tasks):
    told = ended_job(SHARD_ERROR.format(n=1))
    job_changed.send(sender=type(told), job=told)
    assert FinishedRun.objects.filter(job=told).exists()
    missed = ended_job(SHARD_ERROR.format(n=2))
    assert not FinishedRun.objects.filter(job=missed).exists()
    assert tasks.record_missed_runs() == 1
    assert FinishedRun.objects.filter(job=missed).exists()


def test_the_page_groups_a_weeks_unrecognised_failures_with_counts_users_and_images(ended_job, admin_user):
    for n, days in ((1, 1), (2, 3), (3, 12)):
        _record(ended_job(SHARD_ERROR.format(n=n), days_ago=days))
    _record(ended_job("lakefs: giving up after 3 retries\n", days_ago=2, image="my/own:1"))
    _record(ended_job("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2 GiB\n"))  # recognised
    groups = queries.unrecognised_groups()
    assert [(g.last_7_days, g.last_30_days) for g in groups] == [(2, 3), (1, 1)]
    assert groups[0].users == ["alice"] and groups[1].images == ["my/own:1"]
    page = _browser(admin_user).get("/console/failures/").content.decode()
    assert "ShardIndexCorrupt" in page and "CUDA out of memory" not in page
    assert page.count("data-failure-group=") == 2


@pytest.mark.parametrize("who", ["alice", "marketer"])
def test_the_failures_pages_are_the_admins_alone(request, who, ended_job):
    run = _record(ended_job(SHARD_ERROR.format(n=1)))
    browser = _browser(request.getfixturevalue(who))
    for url in (
        "/console/failures/",
        f"/console/failures/groups/{run.signature}/",
        "/console/failures/rules/",
        "/console/failures/rules/export.json",
    ):
        assert browser.get(url).status_code == 403, url
    assert browser.post("/console/failures/rules/new", {"slug": "x"}).status_code == 403
    assert not SiteRule.objects.exists()
    assert Client().get("/console/failures/").status_code == 302  # to sign in


def test_a_rule_is_tried_on_past_runs_before_it_speaks(ended_job, admin_user):
    runs = [_record(ended_job(SHARD_ERROR.format(n=n))) for n in (1, 2)]
    _record(ended_job(HEALTHY, state="COMPLETED", exit_code=0))
    _record(ended_job(HEALTHY + "note: ShardIndexCorrupt: shard 3 skipped\n", state="COMPLETED", exit_code=0))
    browser = _browser(admin_user)
    page = browser.post(
        "/console/failures/rules/new",
        {**_fields(written_for=runs[0].signature).__dict__, "action": "try"},
    ).content.decode()
    assert "Names <strong>2 of 2</strong> failures of the group" in page
    assert "Would wrongly flag <strong>1</strong> healthy run" in page
    assert not SiteRule.objects.exists()  # trying saves nothing


@pytest.mark.parametrize(
    ("pattern", "says"),
    [("", "Write a pattern"), ("(a", "does not understand"), ("x*", "empty log"), ("(?P<at>x)", "Named groups")],
)
def test_a_pattern_that_cannot_serve_is_refused_with_a_reason(admin_user, pattern, says):
    page = _browser(admin_user).post(
        "/console/failures/rules/new", {**_fields(pattern=pattern).__dict__, "action": "save"}
    )
    assert says in page.content.decode()
    assert not SiteRule.objects.exists()


def test_a_pattern_that_backtracks_forever_in_pythons_re_runs_in_linear_time_here(ended_job, admin_user):
    # (a+)+$ against many a's and no end takes Python's `re` exponential time; RE2 does not backtrack.
    _record(ended_job("a" * 10_000 + "!\nFATAL\n"))
    preview = queries.try_rule(as_rule(SiteRule(slug="x", title="t", cause="c", fix="f", pattern="(a+)+$")))
    assert preview.tried_failed == 1


def test_enabling_names_past_failures_shows_on_job_pages_and_is_audited(ended_job, admin_user, alice):
    jobs = [ended_job(SHARD_ERROR.format(n=n)) for n in (1, 2)]
    for job in jobs:
        _record(job)
    rule = actions.write_rule(admin_user, _fields())
    assert not rule.enabled
    assert "Shard index corrupt" not in _browser(alice).get(f"/jobs/{jobs[0].pk}/").content.decode()

    response = _browser(admin_user).post(f"/console/failures/rules/{rule.pk}/enable", {"enabled": "1"}, follow=True)
    assert "it named 2 past failures" in response.content.decode()
    assert set(FinishedRun.objects.values_list("rule_id", flat=True)) == {"site-shard-index"}
    assert queries.unrecognised_groups() == []
    page = _browser(alice).get(f"/jobs/{jobs[0].pk}/").content.decode()
    assert "Shard index corrupt" in page and "lakefs reindex" in page
    new = _record(ended_job(SHARD_ERROR.format(n=5)))
    assert new.rule_id == "site-shard-index"
    actions_done = list(
        AuditLog.objects.filter(target="site-shard-index").order_by("pk").values_list("action", flat=True)
    )
    assert actions_done == ["diagnosis_rule.create", "diagnosis_rule.enable"]

    _browser(admin_user).post(f"/console/failures/rules/{rule.pk}/enable", {"enabled": "0"})
    assert set(FinishedRun.objects.values_list("rule_id", flat=True)) == {""}
    assert "Shard index corrupt" not in _browser(alice).get(f"/jobs/{jobs[0].pk}/").content.decode()


def test_the_export_joins_the_shipped_set_and_names_the_log(admin_user):
    rule = actions.write_rule(admin_user, _fields())
    actions.set_enabled(admin_user, rule.pk, True)
    document = json.loads(_browser(admin_user).get("/console/failures/rules/export.json").content)
    contributed = rules_from(document)
    assert [r.rule_id for r in contributed] == ["site-shard-index"]
    findings = diagnose(SHARD_ERROR.format(n=4), extra_rules=contributed)
    assert findings[0].rule_id == "site-shard-index"
    assert findings[0].fix.startswith("Rebuild the shard index")


def test_a_user_marks_a_diagnosis_and_the_admin_sees_it_beside_the_rule(ended_job, alice, bob, admin_user):
    job = ended_job("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2 GiB\n")
    page = _browser(alice).get(f"/jobs/{job.pk}/").content.decode()
    assert 'data-mark="cuda-oom"' in page
    response = _browser(alice).post(f"/jobs/{job.pk}/diagnosis/mark", {"rule_id": "cuda-oom", "verdict": "wrong"})
    assert response.status_code == 302
    _browser(alice).post(f"/jobs/{job.pk}/diagnosis/mark", {"rule_id": "cuda-oom", "verdict": "helped"})
    assert list(DiagnosisMark.objects.values_list("verdict", flat=True)) == ["helped"]  # changed mind, one mark
    figures = {row.rule_id: row for row in queries.rule_figures()}
    assert (figures["cuda-oom"].helped, figures["cuda-oom"].wrong) == (1, 0)
    rules_page = _browser(admin_user).get("/console/failures/rules/").content.decode()
    assert 'data-rule="cuda-oom"' in rules_page

    assert (
        _browser(bob).post(f"/jobs/{job.pk}/diagnosis/mark", {"rule_id": "cuda-oom", "verdict": "wrong"}).status_code
        == 404
    )
    _browser(alice).post(f"/jobs/{job.pk}/diagnosis/mark", {"rule_id": "no-such-rule", "verdict": "wrong"})
    _browser(alice).post(f"/jobs/{job.pk}/diagnosis/mark", {"rule_id": "cuda-oom", "verdict": "meh"})
    assert list(DiagnosisMark.objects.values_list("rule_id", "verdict")) == [("cuda-oom", "helped")]


def test_a_broker_that_is_down_loses_no_record(ended_job, monkeypatch, caplog):
    from kombu.exceptions import OperationalError

    def broker_down(*args, **kwargs):
        raise OperationalError("Error 111 connecting to 127.0.0.1:6379. Connection refused.")

    monkeypatch.setattr(tasks.record_finished_job, "delay", broker_down)
    job = ended_job(SHARD_ERROR.format(n=1))
    job_changed.send(sender=type(job), job=job)  # the mirror's write goes on
    assert not FinishedRun.objects.filter(job=job).exists()
    assert "the sweep will" in caplog.text
    monkeypatch.undo()
    assert tasks.record_missed_runs() == 1
    assert FinishedRun.objects.get(job=job).rule_id == ""
