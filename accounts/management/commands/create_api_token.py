from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from accounts.models import ApiToken, TooManyTokens


class Command(BaseCommand):
    help = "Create an API token for a user and print it (it is shown only once)."

    def add_arguments(self, parser):
        parser.add_argument("username")
        parser.add_argument("--name", default="cli", help="a label for the token")

    def handle(self, *args, username, name, **options):
        user = get_user_model().objects.filter(username=username).first()
        if user is None:
            raise CommandError(f"no user named {username!r}")
        try:
            _token, key = ApiToken.issue(user, name)
        except TooManyTokens as exc:
            raise CommandError(str(exc)) from exc
        self.stdout.write(key)
