"""Who sees a dataset: its owner, the owning group's active members; admins read. Anyone else
gets 404 on every path, as for a dataset that does not exist, and changes nothing."""

import pytest

from datasets import actions
from datasets.models import Dataset, DatasetVersion, Upload
from datasets.tests.conftest import TUS, metadata
from groups.models import Group, Membership

pytestmark = pytest.mark.django_db


@pytest.fixture
def opened(alice, photos, tus_for):
    tus = tus_for(alice, photos)
    url = tus.create("a.bin", 10)["Location"]
    return tus, url


def _every_request(client, dataset_id, upload_url):
    base = f"/api/v1/datasets/{dataset_id}"
    octet = "application/offset+octet-stream"
    return {
        "retrieve": client.get(f"{base}/"),
        "open": client.post(f"{base}/versions/"),
        "version": client.get(f"{base}/versions/1/"),
        "commit": client.post(f"{base}/versions/1/commit"),
        "abandon": client.post(f"{base}/versions/1/abandon"),
        "create": client.post(
            f"{base}/versions/1/uploads/", HTTP_UPLOAD_LENGTH="1", HTTP_UPLOAD_METADATA=metadata(path="b"), **TUS
        ),
        "head": client.head(upload_url, **TUS),
        "patch": client.generic("PATCH", upload_url, b"0123456789", content_type=octet, HTTP_UPLOAD_OFFSET="0", **TUS),
        "page": client.get(f"/datasets/{dataset_id}/"),
    }


def test_another_user_gets_404_everywhere_and_changes_nothing(opened, photos, bob, api_client_for, client):
    _tus, url = opened
    answers = _every_request(api_client_for(bob), photos.pk, url)
    client.force_login(bob)
    answers["page"] = client.get(f"/datasets/{photos.pk}/")
    assert {name: answer.status_code for name, answer in answers.items()} == {name: 404 for name in answers}
    assert answers["retrieve"].json() == {"detail": "No such dataset."}
    assert api_client_for(bob).get("/api/v1/datasets/").json() == []
    assert DatasetVersion.objects.get().state == "uploading" and Upload.objects.get().offset == 0


def test_a_missing_dataset_reads_the_same(bob, api_client_for):
    assert api_client_for(bob).get("/api/v1/datasets/999999/").json() == {"detail": "No such dataset."}


def test_without_credentials_nothing_is_answered(photos, client):
    assert client.get("/api/v1/datasets/").status_code in (401, 403)
    assert client.get(f"/api/v1/datasets/{photos.pk}/").status_code in (401, 403)
    assert client.get("/datasets/").status_code == 302  # to the sign-in page


def test_a_group_member_reads_and_uploads_the_groups_dataset_and_a_former_member_does_not(
    alice, bob, tus_for, api_client_for
):
    lab = Group.objects.create(name="Lab", slug="lab", organization="pool", created_by=alice)
    Membership.objects.create(group=lab, user=alice, role="pi")
    bobs = Membership.objects.create(group=lab, user=bob, role="member")
    dataset = actions.create_dataset(alice, name="shared", group_id=lab.pk)
    assert dataset.group == lab and dataset.user is None
    listed = api_client_for(bob).get("/api/v1/datasets/").json()
    assert [(row["name"], row["owner_group"], row["owner_user"]) for row in listed] == [("shared", lab.pk, None)]
    from groups.models import GroupPlan
    from plans.models import Plan

    GroupPlan.objects.create(group=lab, plan=Plan.objects.get(code="pro"), started_at="2026-01-01T00:00Z", set_by=alice)
    assert tus_for(bob, dataset).create("by-bob.bin", 3).status_code == 201
    bobs.left_at = "2026-02-01T00:00Z"
    bobs.save()
    assert api_client_for(bob).get(f"/api/v1/datasets/{dataset.pk}/").status_code == 404
    assert api_client_for(bob).get("/api/v1/datasets/").json() == []


def test_a_user_cannot_create_a_dataset_for_a_group_they_are_not_in(alice, bob, api_client_for):
    lab = Group.objects.create(name="Lab", slug="lab", organization="pool", created_by=alice)
    answer = api_client_for(bob).post("/api/v1/datasets/", {"name": "sneaky", "group": lab.pk}, format="json")
    assert answer.status_code == 400 and "group" in answer.json()["errors"]
    assert not Dataset.objects.exists()


def test_an_admin_reads_but_does_not_write_anothers_dataset(opened, photos, admin_user, api_client_for):
    client = api_client_for(admin_user)
    assert client.get(f"/api/v1/datasets/{photos.pk}/").status_code == 200
    assert client.post(f"/api/v1/datasets/{photos.pk}/versions/1/commit").status_code == 403
    assert client.get("/api/v1/datasets/").json() == []  # the list stays the admin's own
