"""Demo accounts (and a few real jobs on the dev cluster) for `make dev`."""

import secrets
from datetime import timedelta
from decimal import Decimal
from pathlib import Path

from allauth.account.models import EmailAddress
from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand
from django.db import transaction
from django.utils import timezone

from accounts import actions
from accounts.models import Profile, Role
from billing.actions import approve_credit_limit
from cluster.errors import SlurmError
from groups import actions as group_actions
from groups.models import Allocation, Group
from groups.tasks import mark_synced, write_group
from jobs import actions as job_actions
from jobs.submission.quota import QuotaExceeded
from jobs.submission.spec import SpecError, SpecPolicy, parse_job_spec
from plans import enforcement
from plans.actions import subscriptions
from plans.catalog import plan_for
from plans.models import Plan

DEMO_USERS = [
    # username, role, plan
    ("demo", Role.USER, "pro"),
    ("admin", Role.ADMIN, "enterprise"),
    ("marketing", Role.MARKETING, "free"),
]

DEMO_COMMAND = """echo "demo job $SLURM_JOB_ID on $(hostname) as $(id -un), GPUs $CUDA_VISIBLE_DEVICES"
for epoch in 1 2 3; do echo "epoch $epoch/3 loss=0.$((RANDOM % 90 + 10))"; sleep $(({seconds} / 3)); done
echo done"""


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
        try:
            # The plans' QOS must exist in Slurm before any account can use them.
            commands = enforcement.sync()
            self.stdout.write(f"  Slurm limits of the plans written ({len(commands)} sacctmgr commands)")
        except SlurmError as exc:
            self.stdout.write(f"  Slurm limits NOT written: {exc.message} (run `manage.py slurm_limits --sync`)")
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
                Profile.objects.filter(user=user).update(role=role)
                subscriptions.change(user, Plan.objects.get(code=plan))
                if plan in settings.PAY_AFTERWARDS_PLANS and not hasattr(user, "credit_limit"):
                    approve_credit_limit(user, Decimal("1000"), actor=None, reason="demo account")
            try:
                profile = actions.provision(
                    user.profile.pk,
                    preferred_name=username if username != "admin" else "portaladmin",
                    # The dev cluster's demo accounts are this portal's own, from an earlier `make dev`.
                    adopt_existing=True,
                )
                where = f"cluster user {profile.cluster_username}"
            except (SlurmError, ValueError) as exc:
                where = f"NOT provisioned on the cluster: {exc}"
            self.stdout.write(f"  {username:<10} password {passwords[username]:<14} ({role}, {plan}; {where})")
        path = self._password_file()
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("".join(f"{name}:{password}\n" for name, password in passwords.items()))
        path.chmod(0o600)
        self._demo_group()
        if jobs:
            self._submit_demo_jobs(jobs)

    def _demo_group(self) -> None:
        """A group with `demo` as its PI, an approved A100 allocation for this quarter and the Pro
        plan to pay its group jobs under, so the group pages, its Slurm account, its limits and
        its invoice have something to show."""
        User = get_user_model()
        demo, admin = User.objects.get(username="demo"), User.objects.get(username="admin")
        group = Group.objects.filter(slug="demo-lab").first()
        if group is None:
            with transaction.atomic():
                verified = {"verified": True, "primary": True}
                EmailAddress.objects.get_or_create(user=demo, email=demo.email, defaults=verified)
                group = group_actions.create_group(demo, name="Demo lab", slug="demo-lab")
                today = timezone.now().date()
                allocation = group_actions.request_allocation(
                    group.pk, demo, gpu_type="a100", gpu_hours=100, starts_on=today,
                    ends_on=today + timedelta(days=90), justification="The demo lab's first quarter.",
                )  # fmt: skip
                group_actions.decide_allocation(allocation.pk, admin, approve=True, note="demo")
                # The lab pays for its group jobs under Pro: its invoice has lines per member.
                group_actions.set_group_plan(group.pk, admin, "pro", "demo")
        try:
            write_group(group)
            mark_synced(group.pk)
            held = Allocation.objects.filter(group=group, state="approved").count()
            self.stdout.write(f"  group {group.name}: Slurm account {group.slurm_account}, {held} allocation(s)")
        except SlurmError as exc:
            self.stdout.write(f"  group {group.name}: NOT written to Slurm: {exc} (the worker retries)")

    def _submit_demo_jobs(self, count: int) -> None:
        """Through the portal's own path: validated, quota-checked, recorded as SUBMITTING,
        then submitted by the worker once `make dev` starts it."""

        user = get_user_model().objects.get(username="demo")
        if not user.profile.provisioned_at:
            self.stdout.write("  (no demo jobs: the demo user is not provisioned)")
            return
        demos = [
            ("mnist-tutorial", "rtx4090", {"gpu_count": 1}, 90),
            ("llm-finetune", "a100", {"gpu_count": 1}, 150),
            ("notebook-12gb", "a100", {"gpu_memory_gb": 12}, 120),
        ]
        for name, gpu_type, gpus, seconds in demos[:count]:
            data = {
                "name": name,
                "image": "nvcr.io/nvidia/pytorch:24.05-py3",
                "gpu_type": gpu_type,
                **gpus,
                "command": DEMO_COMMAND.format(seconds=seconds),
                "time_limit_minutes": 10,
            }
            try:
                spec = parse_job_spec(data, plan=plan_for(user), policy=SpecPolicy.from_settings())
                job = job_actions.submit(user, spec)
            except (SpecError, QuotaExceeded) as exc:
                self.stdout.write(f"  demo job {name} not accepted: {exc}")
                continue
            self.stdout.write(f"  demo job {name} accepted ({job.tres_per_node}); the worker submits it")
