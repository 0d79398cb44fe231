"""audit.0002 copies console's old audit entries into the one audit log before console.0002
drops their table: run for real with the migration executor, on an empty and a full table."""

from datetime import UTC, datetime, timedelta

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

pytestmark = pytest.mark.django_db(transaction=True)

BEFORE = [("audit", "0001_initial"), ("console", "0001_initial")]
COPY = [("audit", "0002_copy_console_auditlog")]
T0 = datetime(2026, 11, 20, 9, 30, tzinfo=UTC)


@pytest.fixture
def migrate():
    """migrate(targets) -> the app registry of that state; every app is migrated to its latest
    again afterwards, whatever the test did."""
    executor = MigrationExecutor(connection)

    def _migrate(targets):
        executor.loader.build_graph()
        executor.migrate(targets)
        return executor.loader.project_state(targets).apps

    yield _migrate
    executor.loader.build_graph()
    executor.migrate(executor.loader.graph.leaf_nodes())


def _tables() -> set[str]:
    with connection.cursor() as cursor:
        return set(connection.introspection.table_names(cursor))


def test_the_migrations_run_in_order_on_an_empty_table(migrate):
    old = migrate(BEFORE)
    assert "console_auditlog" in _tables()
    assert old.get_model("console", "AuditLog").objects.count() == 0
    before = old.get_model("audit", "AuditLog").objects.count()
    new = migrate(COPY)
    assert new.get_model("audit", "AuditLog").objects.count() == before
    # console.0002 needs audit.0002 first; the leaves include it, and the old table is gone.
    migrate([("console", "0002_delete_auditlog")])
    assert "console_auditlog" not in _tables()


def test_existing_entries_are_copied_with_their_time_actor_and_outcome(migrate):
    old = migrate(BEFORE)
    User = old.get_model("auth", "User")
    OldEntry = old.get_model("console", "AuditLog")
    ada = User.objects.create(username="ada")
    gone = User.objects.create(username="gone")
    rows = [
        OldEntry.objects.create(
            actor=ada, action="drain", target="gpu-a100-01", parameters={"reason": "fan noise"}, succeeded=True,
            result="done",
        ),
        OldEntry.objects.create(
            actor=None, action="gpu_reset", target="gpu-h100-01/gpu1", parameters={"reset": 3, "reservation": ""},
            succeeded=False, result="the GPUs did not become free",
        ),
        OldEntry.objects.create(actor=gone, action="resume", target="gpu-a100-01", succeeded=True, result="done"),
    ]  # fmt: skip
    # auto_now_add set the times on insert; give them distinct, known ones.
    for offset, row in enumerate(rows):
        OldEntry.objects.filter(pk=row.pk).update(created_at=T0 + timedelta(minutes=offset))

    new = migrate(COPY)
    copied = {entry.action: entry for entry in new.get_model("audit", "AuditLog").objects.all()}
    assert set(copied) == {"drain", "gpu_reset", "resume"}
    drain = copied["drain"]
    assert (drain.actor_id, drain.actor_name, drain.target) == (ada.pk, "ada", "gpu-a100-01")
    assert drain.created_at == T0
    assert drain.parameters == {"reason": "fan noise"} and drain.reason == "fan noise"
    assert drain.succeeded and drain.result == "done"
    reset = copied["gpu_reset"]
    assert reset.actor_id is None and reset.actor_name == ""
    assert reset.created_at == T0 + timedelta(minutes=1)
    assert not reset.succeeded and reset.result == "the GPUs did not become free"
    assert reset.parameters == {"reset": 3, "reservation": ""} and reset.reason == ""
    assert copied["resume"].actor_name == "gone"

    # Back and forth again (console.0002 undone, the copy re-run): nothing is copied twice.
    migrate(BEFORE)
    again = migrate(COPY)
    assert again.get_model("audit", "AuditLog").objects.count() == 3
