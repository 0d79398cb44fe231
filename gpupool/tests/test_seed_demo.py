"""`make dev`'s demo data: three accounts with their roles, on the cluster, and demo jobs."""

import pytest
from django.core.management import call_command

from accounts.models import Profile
from cluster.clusters.services import slurm_cli
from cluster.commands.accounts import SlurmAccounts
from groups.models import Group
from jobs.models import Job

pytestmark = [pytest.mark.slurm, pytest.mark.django_db]


def test_seed_demo_creates_provisioned_accounts_and_portal_jobs(settings, tmp_path, capsys):
    settings.VAR_DIR = tmp_path
    call_command("seed_demo", jobs=3)
    out = capsys.readouterr().out
    roles = dict(Profile.objects.values_list("user__username", "role"))
    assert roles == {"demo": "user", "admin": "admin", "marketing": "marketing"}
    assert all(Profile.objects.values_list("provisioned_at", flat=True))
    passwords = dict(line.split(":", 1) for line in (tmp_path / "demo-passwords.txt").read_text().splitlines())
    assert set(passwords) == {"demo", "admin", "marketing"}
    assert all(f"password {password}" in out for password in passwords.values())
    assert oct((tmp_path / "demo-passwords.txt").stat().st_mode)[-3:] == "600"
    jobs = Job.objects.filter(owner__username="demo")
    assert sorted(jobs.values_list("tres_per_node", flat=True)) == [
        "gres/gpu:a100:1",
        "gres/gpu:rtx4090:1",
        "gres/shard:a100:3",
    ]
    assert {job.state for job in jobs} == {"SUBMITTING"}  # the worker submits them
    # A demo group with an approved allocation, written into Slurm with demo as its member.
    group = Group.objects.get(slug="demo-lab")
    shown = SlurmAccounts(slurm_cli()).show([group.slurm_account])[group.slurm_account]
    assert shown.users == {"demo"} and shown.gpu_minutes["gres/gpu:a100"] == 100 * 60
    assert f"group Demo lab: Slurm account {group.slurm_account}, 1 allocation(s)" in out

    call_command("seed_demo", jobs=0)  # again: same accounts, same passwords
    assert dict(line.split(":", 1) for line in (tmp_path / "demo-passwords.txt").read_text().splitlines()) == passwords
