"""The tables' own rules: exactly one owner, one name per owner, numbered versions, one open
version at a time, a ready version has its checksum."""

import pytest
from django.db import IntegrityError, transaction

from datasets import actions
from datasets.models import Dataset, DatasetVersion, VersionState
from datasets.queries import DatasetError
from groups.models import Group

pytestmark = pytest.mark.django_db


@pytest.fixture
def lab(alice):
    return Group.objects.create(name="Lab", slug="lab", organization="pool", created_by=alice)


def test_a_dataset_has_exactly_one_owner(alice, lab):
    for owners in ({}, {"user": alice, "group": lab}):
        with pytest.raises(IntegrityError), transaction.atomic():
            Dataset.objects.create(name="x", created_by=alice, **owners)
    assert not Dataset.objects.exists()
    Dataset.objects.create(name="mine", user=alice, created_by=alice)
    Dataset.objects.create(name="ours", group=lab, created_by=alice)
    assert Dataset.objects.count() == 2


def test_a_name_is_one_dataset_per_owner(alice, bob, photos):
    with pytest.raises(DatasetError) as taken:
        actions.create_dataset(alice, name="photos")
    assert taken.value.status == 409
    assert actions.create_dataset(bob, name="photos").user == bob  # another owner's namespace


@pytest.mark.parametrize("name", ["", "-x", "with space", "a/b", "..", "x" * 81, "ünï"])
def test_a_name_that_could_not_be_a_mount_point_is_refused(alice, name):
    with pytest.raises(DatasetError) as refused:
        actions.create_dataset(alice, name=name)
    assert refused.value.field == "name" and not Dataset.objects.exists()


def test_versions_are_numbered_and_one_is_open_at_a_time(alice, photos):
    first = actions.open_version(photos, alice)
    assert first.number == 1 and first.state == VersionState.UPLOADING
    with pytest.raises(DatasetError) as still_open:
        actions.open_version(photos, alice)
    assert still_open.value.status == 409 and "Version 1" in still_open.value.message
    actions.abandon_version(first, alice)
    assert actions.open_version(photos, alice).number == 2


def test_a_ready_version_must_carry_its_checksum(alice, photos):
    version = actions.open_version(photos, alice)
    with pytest.raises(IntegrityError), transaction.atomic():
        DatasetVersion.objects.filter(pk=version.pk).update(state=VersionState.READY)
    assert DatasetVersion.objects.get(pk=version.pk).state == VersionState.UPLOADING
