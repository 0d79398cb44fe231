"""Copy the console's audit entries (node drains and resumes, GPU reset steps) into the one
audit log. console.0002 deletes the old table, and runs only after this (its dependency)."""

from django.conf import settings
from django.db import migrations

BATCH = 500


def _username_field() -> str:
    from django.contrib.auth import get_user_model

    # Only the field's name: historical models carry fields, not USERNAME_FIELD.
    return getattr(get_user_model(), "USERNAME_FIELD", "username")


def copy_console_entries(apps, schema_editor):
    OldEntry = apps.get_model("console", "AuditLog")
    NewEntry = apps.get_model("audit", "AuditLog")
    database = schema_editor.connection.alias
    username = _username_field()
    old_rows = OldEntry.objects.using(database).select_related("actor").order_by("id")
    last_id = 0
    while True:
        batch = list(old_rows.filter(id__gt=last_id)[:BATCH])
        if not batch:
            return
        last_id = batch[-1].id
        # Applied again after a rollback of console.0002 (which empties nothing here), rows
        # already copied are recognised and not copied twice.
        present = set(
            NewEntry.objects.using(database)
            .filter(created_at__in=[row.created_at for row in batch])
            .values_list("created_at", "action", "target", "actor_id")
        )
        copies = []
        for row in batch:
            if (row.created_at, row.action, row.target, row.actor_id) in present:
                continue
            parameters = row.parameters if isinstance(row.parameters, dict) else {"value": row.parameters}
            reason = parameters.get("reason")
            copies.append(
                NewEntry(
                    actor_id=row.actor_id,
                    actor_name=getattr(row.actor, username, "") if row.actor_id else "",
                    action=row.action,
                    target=row.target,
                    parameters=parameters,
                    # A drain kept its reason among the parameters; the new log has a field for it.
                    reason=reason if isinstance(reason, str) else "",
                    succeeded=row.succeeded,
                    result=row.result,
                    created_at=row.created_at,
                )
            )
        NewEntry.objects.using(database).bulk_create(copies)


class Migration(migrations.Migration):
    dependencies = [
        ("audit", "0001_initial"),
        ("console", "0001_initial"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        # Backwards the copies stay: the audit log is append-only, and forwards again skips them.
        migrations.RunPython(copy_console_entries, migrations.RunPython.noop, elidable=False),
    ]
