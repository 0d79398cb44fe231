"""Every form whose action cannot be undone asks first (static/js/confirm.js reads its
`data-confirm`): found in the templates themselves, so a new form without the question fails."""

import re
from pathlib import Path

from django.conf import settings

TEMPLATES = Path(settings.BASE_DIR) / "templates"
# URL names whose POST cannot be undone (or is undone only by another deliberate act).
CANNOT_BE_UNDONE = [
    "jobs:cancel",
    "sweeps:sweep_cancel",
    "billing:group_plan",
    "accounts:revoke_api_token",
    "groups:revoke",
    "console:node_drain",
    "console:node_resume",
    "console:gpu_reset",
]
FORM = re.compile(r"<form\b[^>]*>", re.S)


def _forms():
    for path in TEMPLATES.rglob("*.html"):
        for tag in FORM.findall(path.read_text()):
            yield path.relative_to(TEMPLATES), tag


def test_every_form_that_cannot_be_undone_asks_first():
    unasked = [
        (str(path), name)
        for path, tag in _forms()
        for name in CANNOT_BE_UNDONE
        if f"url '{name}'" in tag or f'url "{name}"' in tag
        if "data-confirm=" not in tag
    ]
    assert unasked == []
    found = {name for _path, tag in _forms() for name in CANNOT_BE_UNDONE if name in tag}
    assert found == set(CANNOT_BE_UNDONE)  # the list names forms that exist


def test_a_plan_switch_and_a_power_down_ask_and_say_what_happens():
    plan = (TEMPLATES / "accounts" / "plan.html").read_text()
    switch = next(tag for tag in FORM.findall(plan) if "data-confirm" in tag)
    assert "billed from today" in switch and "cancelled" in switch
    operations = (TEMPLATES / "console" / "operations.html").read_text()
    power = [tag for tag in FORM.findall(operations) if "node_power" in tag and "data-confirm" in tag]
    assert power and "powers off once idle" in power[0]


def test_a_job_page_is_headed_by_the_portals_id_and_says_what_it_holds_in_words(alice, client):
    from jobs.models import Job

    held = "cpu=1,mem=1000M,node=1,billing=1,gres/gpu=1,gres/gpu:a100=1"
    first = Job.objects.create(
        owner=alice, name="one", state="RUNNING", slurm_job_id=2, cluster="site-b", allocated_tres=held
    )
    second = Job.objects.create(owner=alice, name="two", state="RUNNING", slurm_job_id=2)
    client.force_login(alice)
    for job in (first, second):
        page = client.get(f"/jobs/{job.pk}/").content.decode()
        heading = re.search(r"<h1[^>]*>(.*?)</h1>", page, re.S).group(1)
        assert f"Job {job.pk}" in heading and job.name in heading
        assert re.search(rf"data-slurm-id>job 2 on {job.cluster}<", page)
    # What it holds, in words; Slurm's own text only in the title.
    page = client.get(f"/jobs/{first.pk}/").content.decode()
    label = settings.GPU_TYPES["a100"]["label"]
    assert f"data-held>1 {label} GPU, 1 CPU, 1,000 MB memory<" in page
    assert f">{held}<" not in page
