"""The audit page (admins only, filtered, 50 a page), the recent actions on node and GPU
pages, and what a drain writes: database only, no Slurm."""

from datetime import datetime, timedelta

import pytest
from django.db import connection
from django.utils import timezone

from audit.log import record
from audit.models import AuditLog
from cluster.commands.cli import SlurmCli
from cluster.models import Node
from console.actions import node_actions
from console.views.audit import PAGE_SIZE

pytestmark = pytest.mark.django_db
URL = "/console/audit/"


def _at(entry: AuditLog, moment: datetime) -> AuditLog:
    """Date an entry: the log refuses updates through the ORM, so a test writes the time raw."""
    with connection.cursor() as cursor:
        cursor.execute(f"UPDATE {AuditLog._meta.db_table} SET created_at = %s WHERE id = %s", [moment, entry.pk])
    return AuditLog.objects.get(pk=entry.pk)


@pytest.fixture
def entries(admin_user, alice):
    today = timezone.localtime().replace(hour=12, minute=0, second=0, microsecond=0)
    return {
        "drain": _at(
            record(
                admin_user, "drain", "gpu-a100-01", reason="fan noise", before={"flags": ""}, after={"flags": "DRAIN"}
            ),
            today,
        ),
        "resume": _at(record(admin_user, "resume", "gpu-a100-01"), today - timedelta(days=3)),
        "failed": _at(
            record(
                admin_user, "gpu_reset.hold", "gpu-h100-01/gpu1", succeeded=False, result="Requested nodes are busy"
            ),
            today - timedelta(days=10),
        ),
        "account": _at(record(None, "account.deactivate", f"user:{alice.username}", reason="left"), today),
    }


def _shown(response, entries=None) -> set[int]:
    """The entries listed; with `entries`, only those of them (the people fixtures write
    entries of their own: account changes)."""
    shown = {row["entry"].pk for row in response.context["rows"]}
    return shown if entries is None else shown & {entry.pk for entry in entries.values()}


def test_an_admin_sees_every_entry_with_its_reason_and_change(client, admin_user, entries):
    client.force_login(admin_user)
    response = client.get(URL)
    assert response.status_code == 200
    assert _shown(response, entries) == {entry.pk for entry in entries.values()}
    body = response.content.decode()
    assert "fan noise" in body and "flags: – → DRAIN" in body
    assert "Requested nodes are busy" in body
    assert 'class="table-wrap"' in body  # the table scrolls inside its box on a phone


@pytest.mark.parametrize(
    "query, expected",
    [
        ({"action": "drain"}, {"drain"}),
        ({"actor": "AD"}, {"drain", "resume", "failed"}),  # ada, any case
        ({"target": "gpu-a100-01"}, {"drain", "resume"}),
        ({"target": "gpu1"}, {"failed"}),
        ({"succeeded": "no"}, {"failed"}),
        ({"succeeded": "yes", "target": "user:"}, {"account"}),
        ({"action": "resume", "actor": "ada"}, {"resume"}),
    ],
)
def test_filters_narrow_the_list(client, admin_user, entries, query, expected):
    client.force_login(admin_user)
    response = client.get(URL, query)
    assert _shown(response, entries) == {entries[name].pk for name in expected}


def test_the_date_range_takes_whole_local_days(client, admin_user, entries):
    client.force_login(admin_user)
    today = timezone.localdate()
    shown = _shown(
        client.get(URL, {"date_from": today - timedelta(days=3), "date_to": today - timedelta(days=1)}), entries
    )
    assert shown == {entries["resume"].pk}
    assert _shown(client.get(URL, {"date_to": today - timedelta(days=5)}), entries) == {entries["failed"].pk}
    assert _shown(client.get(URL, {"date_from": today}), entries) == {entries["drain"].pk, entries["account"].pk}


def test_bad_filters_are_shown_as_errors_and_the_good_ones_still_apply(client, admin_user, entries):
    client.force_login(admin_user)
    response = client.get(URL, {"action": "no-such-action", "target": "gpu-a100-01"})
    assert response.status_code == 200
    assert response.context["form"].errors["action"]
    assert _shown(response, entries) == {entries["drain"].pk, entries["resume"].pk}
    backwards = client.get(
        URL, {"date_from": timezone.localdate(), "date_to": timezone.localdate() - timedelta(days=1)}
    )
    assert "The range ends before it starts." in backwards.content.decode()


def test_fifty_a_page_newest_first_and_the_filters_follow_the_pages(client, admin_user):
    base = timezone.now() - timedelta(days=1)
    for number in range(PAGE_SIZE * 2 + 5):
        _at(record(admin_user, "drain", f"node-{number:03d}", reason="r"), base + timedelta(minutes=number))
    record(admin_user, "resume", "node-000")
    client.force_login(admin_user)
    first = client.get(URL, {"action": "drain"})
    rows = [row["entry"] for row in first.context["rows"]]
    assert len(rows) == PAGE_SIZE and rows[0].target == "node-104"
    assert [row.created_at for row in rows] == sorted((row.created_at for row in rows), reverse=True)
    assert "action=drain&amp;page=2" in first.content.decode()
    last = client.get(URL, {"action": "drain", "page": 3})
    assert [row["entry"].target for row in last.context["rows"]] == [f"node-{n:03d}" for n in range(4, -1, -1)]
    assert client.get(URL, {"action": "drain", "page": "999"}).context["page"].number == 3


@pytest.mark.parametrize("person", ["alice", "marketer"])
def test_users_and_marketing_cannot_see_the_audit_page(client, request, person, entries):
    client.force_login(request.getfixturevalue(person))
    response = client.get(URL)
    assert response.status_code == 403
    assert "fan noise" not in response.content.decode()


def test_anonymous_visitors_are_sent_to_log_in(client, entries):
    response = client.get(URL)
    assert response.status_code == 302 and "/login" in response["Location"]


def _node(name="gpu-a100-01", flags=""):
    return Node.objects.create(
        name=name, state="IDLE", state_flags=flags, gpus=[{"type": "a100", "count": 4, "used_indexes": []}]
    )


def test_node_and_gpu_pages_show_their_latest_actions_to_admins_only(client, admin_user, alice, entries):
    _node()
    _node("gpu-h100-01")
    record(admin_user, "drain", "gpu-a100-02", reason="another node's")
    client.force_login(admin_user)
    node_page = client.get("/console/nodes/gpu-a100-01/")
    assert [entry.pk for entry in node_page.context["audit"]] == [entries["drain"].pk, entries["resume"].pk]
    assert "another node" not in node_page.content.decode()
    gpu_page = client.get("/console/nodes/gpu-h100-01/gpus/1/")
    assert [entry.pk for entry in gpu_page.context["audit"]] == [entries["failed"].pk]
    assert "?target=gpu-h100-01/gpu1" in gpu_page.content.decode()
    client.force_login(alice)
    assert "fan noise" not in client.get("/console/nodes/gpu-a100-01/").content.decode()
    assert "Requested nodes are busy" not in client.get("/console/nodes/gpu-h100-01/gpus/1/").content.decode()


@pytest.fixture
def fake_slurm(monkeypatch):
    """Commands recorded, not run (noop), and a mirror that sees what a recorded drain did."""
    clis: list[SlurmCli] = []

    def cli():
        clis.append(SlurmCli(prefix=["slurm-host"], noop=True))
        return clis[-1]

    def mirror(_client):
        for argv in executed():
            if "State=DRAIN" in argv:
                words = dict(word.split("=", 1) for word in argv if "=" in word)
                Node.objects.filter(name=words["NodeName"]).update(state_flags="DRAIN", reason=words["Reason"])
        return 0

    def executed():
        return [argv for instance in clis for argv in instance.executed]

    monkeypatch.setattr(node_actions, "slurm_cli", cli)
    monkeypatch.setattr(node_actions, "mirror_nodes", mirror)
    return executed


def test_a_drain_writes_the_node_before_and_after_and_the_reason(client, admin_user, fake_slurm):
    _node()
    client.force_login(admin_user)
    response = client.post("/console/nodes/gpu-a100-01/drain", {"reason": "  GPU 2 Xid 79 "})
    assert response.status_code == 302
    assert fake_slurm() == [
        ["slurm-host", "scontrol", "update", "NodeName=gpu-a100-01", "State=DRAIN", "Reason=GPU 2 Xid 79"]
    ]
    entry = AuditLog.objects.get(action="drain")
    assert (entry.actor, entry.target, entry.reason, entry.succeeded) == (
        admin_user,
        "gpu-a100-01",
        "GPU 2 Xid 79",
        True,
    )
    assert entry.result == "done"  # scontrol prints nothing on success
    assert entry.before == {"state": "IDLE", "flags": "", "reason": ""}
    assert entry.after == {"state": "IDLE", "flags": "DRAIN", "reason": "GPU 2 Xid 79"}


def test_a_refused_drain_is_written_with_its_error_and_no_change(client, admin_user, fake_slurm):
    _node()
    client.force_login(admin_user)
    client.post("/console/nodes/gpu-a100-01/drain", {"reason": "bad; reason"})
    entry = AuditLog.objects.get(action="drain")
    assert not entry.succeeded and "reason" in entry.result
    assert entry.before == entry.after == {"state": "IDLE", "flags": "", "reason": ""}
    assert fake_slurm() == []  # refused before anything ran
