from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from accounts import actions
from cluster.errors import SlurmError


class Command(BaseCommand):
    help = (
        "Provision a portal user on the cluster (again). With --cluster-user and --adopt an admin maps the "
        "portal account to an existing cluster or directory account, which sign-up never does by itself."
    )

    def add_arguments(self, parser):
        parser.add_argument("username", help="the portal user name")
        parser.add_argument("--cluster-user", help="the cluster account to use (default: derived)")
        parser.add_argument("--adopt", action="store_true", help="the cluster account exists and is this person's")

    def handle(self, *args, username, cluster_user=None, adopt=False, **options):
        user = get_user_model().objects.filter(username=username).select_related("profile").first()
        if user is None:
            raise CommandError(f"no portal user {username!r}")
        profile = user.profile
        if cluster_user and profile.cluster_username and profile.cluster_username != cluster_user:
            raise CommandError(f"{username} is already mapped to {profile.cluster_username}")
        try:
            profile = actions.provision(profile.pk, preferred_name=cluster_user, adopt_existing=adopt)
        except (SlurmError, ValueError) as exc:
            raise CommandError(f"provisioning failed: {exc}") from exc
        self.stdout.write(f"{username} -> cluster user {profile.cluster_username} (uid {profile.cluster_uid})")
