"""Every user's tutorial template as it was given (the MNIST one, untouched) becomes the current
tutorial: its old command trained nothing where the image has no PyTorch, yet said "MNIST". A
template its owner changed stays theirs as it is. The tutorial's spec is text, read from
credits.tutorial (as 0002 does)."""

import hashlib

from django.db import migrations

OLD_NAME = "Tutorial: MNIST on one GPU"


def forward(apps, schema_editor):
    from credits.tutorial import RETIRED_COMMAND_SHA256, TEMPLATE_NAME, TUTORIAL_SPEC

    JobTemplate = apps.get_model("jobs", "JobTemplate")
    for template in JobTemplate.objects.filter(name=OLD_NAME, kind="").iterator():
        spec = template.spec or {}
        command = spec.get("command")
        if not isinstance(command, str) or hashlib.sha256(command.encode()).hexdigest() not in RETIRED_COMMAND_SHA256:
            continue  # the owner's own version now
        if spec.get("image") != TUTORIAL_SPEC["image"]:
            continue
        if JobTemplate.objects.filter(owner_id=template.owner_id, name=TEMPLATE_NAME).exists():
            template.delete()
        else:
            JobTemplate.objects.filter(pk=template.pk).update(name=TEMPLATE_NAME, spec=TUTORIAL_SPEC)


class Migration(migrations.Migration):
    dependencies = [
        ("credits", "0005_campaign_approval"),
        ("jobs", "0011_template_kind"),
    ]

    operations = [migrations.RunPython(forward, migrations.RunPython.noop)]
