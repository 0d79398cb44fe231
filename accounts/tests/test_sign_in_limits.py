"""Failed sign-ins are limited per address and per (name, address): an abuser cannot lock a
named account out from other addresses, and the Django admin has no sign-in of its own."""

import pytest
from django.core.cache import cache
from django.test import Client

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _fresh_counts():
    cache.clear()  # allauth keeps its counts in the default cache
    yield
    cache.clear()


def _sign_in(address: str, login: str, password: str):
    client = Client(REMOTE_ADDR=address)
    response = client.post("/accounts/login/", {"login": login, "password": password})
    return client, response


def _signed_in(client) -> bool:
    return "_auth_user_id" in client.session


def test_failures_from_one_address_do_not_lock_the_account_out_elsewhere(admin_user):
    for _ in range(6):
        _client, response = _sign_in("203.0.113.9", "ada", "guess")
        assert response.status_code == 200
    # From the abuser's address the right password is refused now: the limit holds there...
    client, response = _sign_in("203.0.113.9", "ada", "pw-ada")
    assert not _signed_in(client)
    assert b"Too many failed login attempts" in response.content
    # ...and the admin, from their own address, signs in.
    client, response = _sign_in("198.51.100.7", "ada", "pw-ada")
    assert response.status_code == 302 and _signed_in(client)


def test_one_address_guessing_many_names_meets_its_own_limit(settings, admin_user, alice):
    for index in range(10):
        _sign_in("203.0.113.9", f"nobody{index}", "guess")
    client, response = _sign_in("203.0.113.9", "alice", "pw-alice")
    assert not _signed_in(client)
    assert b"Too many failed login attempts" in response.content


def test_the_django_admin_signs_in_through_the_portal():
    response = Client().get("/django-admin/login/?next=/django-admin/")
    assert response.status_code == 302
    assert response["Location"] == "/accounts/login/?next=/django-admin/"
    # A direct POST of credentials to the admin's own form finds no form to take them.
    assert Client().post("/django-admin/login/", {"username": "ada", "password": "x"}).status_code != 200
