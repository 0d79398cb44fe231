"""allauth's e-mails name the portal, not the host the request came to."""

import pytest
from django.core import mail

pytestmark = pytest.mark.django_db


def test_a_password_reset_email_says_the_portals_name_and_address(alice, client, settings):
    settings.SITE_NAME = "Lab GPUs"
    settings.SITE_URL = "https://gpus.example.org"
    alice.email = "alice@example.org"
    alice.save()
    from allauth.account.models import EmailAddress

    EmailAddress.objects.update_or_create(user=alice, email=alice.email, defaults={"verified": True, "primary": True})
    client.post("/accounts/password/reset/", {"email": alice.email})
    assert len(mail.outbox) == 1
    message = mail.outbox[0]
    assert message.subject.startswith("[Lab GPUs] ")
    assert "Hello from Lab GPUs!" in message.body and "gpus.example.org" in message.body
    assert "Hello from testserver" not in message.body  # (its link goes where the request came from)
