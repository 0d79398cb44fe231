"""Shared fixtures: the named people of access tests, and the real dev cluster."""

import pytest
from django.contrib.auth import get_user_model

from accounts.models import Role


def _person(username: str, role: str = Role.USER, plan: str = "pro"):
    user = get_user_model().objects.create_user(username=username, password="pw-" + username, email=f"{username}@x.org")
    user.profile.role = role
    user.profile.plan = plan
    user.profile.save()
    return user


@pytest.fixture
def alice(db):
    """A user who owns things."""
    return _person("alice")


@pytest.fixture
def bob(db):
    """Another user, who must see nothing of alice's."""
    return _person("bob")


@pytest.fixture
def admin_user(db):
    return _person("ada", Role.ADMIN, "enterprise")


@pytest.fixture
def marketer(db):
    return _person("mark", Role.MARKETING, "free")
