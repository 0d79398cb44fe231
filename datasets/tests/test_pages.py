"""The Datasets pages: the list with the user's and their groups' datasets, the form, a dataset's versions."""

import pytest

from datasets import actions
from datasets.models import Dataset
from groups.models import Group, Membership

pytestmark = pytest.mark.django_db


def test_the_list_shows_own_and_group_datasets_only(alice, bob, client):
    lab = Group.objects.create(name="Vision lab", slug="vision", organization="pool", created_by=bob)
    Membership.objects.create(group=lab, user=bob, role="pi")
    Membership.objects.create(group=lab, user=alice, role="member")
    actions.create_dataset(alice, name="mine")
    actions.create_dataset(bob, name="shared", group_id=lab.pk)
    actions.create_dataset(bob, name="bobs-secret")
    client.force_login(alice)
    page = client.get("/datasets/").content.decode()
    assert 'data-dataset="mine"' in page and 'data-dataset="shared"' in page and "group Vision lab" in page
    assert "bobs-secret" not in page


def test_the_form_creates_a_dataset_and_refuses_a_bad_name(alice, client):
    client.force_login(alice)
    bad = client.post("/datasets/", {"name": "../etc", "description": ""})
    assert bad.status_code == 200 and not Dataset.objects.exists()
    made = client.post("/datasets/", {"name": "imagenet-mini", "description": "tiny"})
    dataset = Dataset.objects.get()
    assert made.status_code == 302 and made["Location"] == f"/datasets/{dataset.pk}/"
    assert (dataset.user, dataset.description) == (alice, "tiny")


def test_the_detail_page_offers_the_upload_and_resuming_an_open_version(alice, photos, client):
    actions.open_version(photos, alice)
    client.force_login(alice)
    page = client.get(f"/datasets/{photos.pk}/").content.decode()
    assert 'data-open-version="1"' in page and "webkitdirectory" in page and "tus.min.js" in page
    assert "NVMe quota" in page and "0.00 GB of 500.00 GB" in page  # Pro's 500 GB
