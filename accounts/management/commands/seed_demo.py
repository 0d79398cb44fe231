"""Demo accounts (and a few real jobs on the dev cluster) for `make dev`."""

import secrets
from pathlib import Path

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand
from django.db import transaction

from accounts import actions
from accounts.models import Profile, Role
from cluster.errors import SlurmError
from cluster.services import job_paths, rest_client
from cluster.types import JobSubmission

DEMO_USERS = [
    # username, role, plan
    ("demo", Role.USER, "pro"),
    ("admin", Role.ADMIN, "enterprise"),
    ("marketing", Role.MARKETING, "free"),
]

DEMO_SCRIPT = """#!/bin/bash
echo "demo job $SLURM_JOB_ID on $(hostname) as $(id -un)"
echo "CUDA_VISIBLE_DEVICES=$CUDA_VISIBLE_DEVICES"
sleep {seconds}
echo done
"""


class Command(BaseCommand):
    help = "Create the demo, admin and marketing accounts, provision them on the cluster, and submit demo jobs."

    def add_arguments(self, parser):
        parser.add_argument("--jobs", type=int, default=3, help="demo jobs to submit as `demo` (0 for none)")

    def _password_file(self) -> Path:
        return Path(settings.VAR_DIR) / "demo-passwords.txt"

    def _known_passwords(self) -> dict[str, str]:
        path = self._password_file()
        if not path.exists():
            return {}
        return dict(line.split(":", 1) for line in path.read_text().splitlines() if ":" in line)

    def handle(self, *args, jobs: int = 3, **options):
        passwords = self._known_passwords()
        User = get_user_model()
        for username, role, plan in DEMO_USERS:
            with transaction.atomic():
                user, created = User.objects.get_or_create(
                    username=username, defaults={"email": f"{username}@example.org"}
                )
                if created or username not in passwords:
                    passwords[username] = secrets.token_urlsafe(9)
                    user.set_password(passwords[username])
                user.is_staff = user.is_superuser = role == Role.ADMIN
                user.save()
                Profile.objects.filter(user=user).update(role=role, plan=plan)
            try:
                profile = actions.provision(
                    user.profile.pk, preferred_name=username if username != "admin" else "portaladmin"
                )
                where = f"cluster user {profile.cluster_username}"
            except (SlurmError, ValueError) as exc:
                where = f"NOT provisioned on the cluster: {exc}"
            self.stdout.write(f"  {username:<10} password {passwords[username]:<14} ({role}, {plan}; {where})")
        path = self._password_file()
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("".join(f"{name}:{password}\n" for name, password in passwords.items()))
        path.chmod(0o600)
        if jobs:
            self._submit_demo_jobs(jobs)

    def _submit_demo_jobs(self, count: int) -> None:
        profile = Profile.objects.get(user__username="demo")
        if not profile.provisioned_at:
            self.stdout.write("  (no demo jobs: the demo user is not provisioned)")
            return
        client = rest_client(profile.cluster_username)
        paths = job_paths()
        gpu_types = ["rtx4090", "a100", "rtx4090"]
        for index in range(count):
            directory = paths.job_dir(f"demo-{secrets.token_hex(4)}")
            local = paths.to_local(directory)
            local.mkdir(parents=True, exist_ok=True)
            local.chmod(0o1777)
            submission = JobSubmission(
                name=f"demo-{index + 1}",
                script=DEMO_SCRIPT.format(seconds=60 + 30 * index),
                working_directory=str(directory),
                standard_output=f"{directory}/stdout.log",
                standard_error=f"{directory}/stderr.log",
                partition=settings.SLURM_PARTITION,
                account=settings.SLURM_ACCOUNT,
                time_limit_minutes=10,
                tres_per_node=f"gres/gpu:{gpu_types[index % len(gpu_types)]}:1",
            )
            try:
                job_id = client.submit_job(submission)
                self.stdout.write(f"  demo job {job_id} submitted ({submission.tres_per_node})")
            except SlurmError as exc:
                self.stdout.write(f"  demo job not submitted: {exc}")
