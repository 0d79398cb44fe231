"""A group's name by the one rule (groups.validators), wherever a name comes in: the page's
form, the API, the admin, and groups.actions itself; and the page's organisation field,
offered to those who may choose one and working for them."""

import pytest
from allauth.account.models import EmailAddress
from django.core.exceptions import ValidationError
from django.test import Client

from groups import actions
from groups.models import Group
from groups.queries import GroupError
from groups.validators import NAME_MAX_LENGTH, validate_group_name
from testing.admin_forms import change_form_data

# What users found: names that pushed the lab view's columns off screen and broke its chart.
BAD_NAMES = {
    "0" * 80: "At most 60 characters",
    "0000": "needs at least one letter",
    "2024": "needs at least one letter",
    "--- !!": "needs at least one letter",
    "Lab\x07": "a control character (U+0007",
    "\x1b[31mLab": "a control character (U+001B",
    "Lab\ue000": "a private-use character (U+E000",
    "Lab\U000f0000": "a private-use character",
    "Lab\u0378": "an unassigned character (U+0378",
    "Lab\u200bX": "an invisible formatting character (U+200B ZERO WIDTH SPACE",
    "Lab\u202eX": "an invisible formatting character (U+202E",
    "Lab\nX": "a control character (U+000A",
    "Lab\u2028X": "a line break",
    "Lab\u00a0X": "a space other than the plain space",
    "Lab  X": "two spaces in a row",
    " Lab": "may not start or end with a space",
    "\u0301Lab": "may not start with a combining mark",
    "": "A name is required",
}
GOOD_NAMES = [
    "Vision lab", "R&D (2024) — NLP", "Café Müller", "Лаборатория 5", "視覚研究室", "C++ team", "e\u0301te", "L" * 60,
]  # fmt: skip


@pytest.mark.parametrize("name, said", BAD_NAMES.items(), ids=[repr(name)[:20] for name in BAD_NAMES])
def test_a_bad_name_is_refused_with_words_that_say_what_is_wrong(name, said):
    with pytest.raises(ValidationError) as refused:
        validate_group_name(name)
    assert said in refused.value.messages[0]


@pytest.mark.parametrize("name", GOOD_NAMES)
def test_names_people_write_are_taken(name):
    validate_group_name(name)


def test_the_limit_is_a_column_width_not_the_database_column():
    assert NAME_MAX_LENGTH == 60 and Group._meta.get_field("name").max_length == 80
    assert validate_group_name in Group._meta.get_field("name").validators


@pytest.fixture
def verified_alice(alice):
    EmailAddress.objects.create(user=alice, email=alice.email, verified=True, primary=True)
    return alice


@pytest.mark.django_db
def test_actions_the_page_and_the_api_refuse_the_same_names_and_create_nothing(verified_alice, api_client_for):
    with pytest.raises(GroupError) as refused:
        actions.create_group(verified_alice, name="0" * 80, slug="zeros")
    assert refused.value.field == "name" and "At most 60" in refused.value.message

    browser = Client()
    browser.force_login(verified_alice)
    page = browser.post("/groups/", {"name": "Lab\ue000\ue001", "slug": "pua"})
    assert page.status_code == 400
    body = page.content.decode()
    assert 'data-field-error="name"' in body and "private-use character (U+E000" in body
    assert 'value="pua"' in body  # the other values stay for the next try

    api = api_client_for(verified_alice)
    response = api.post("/api/v1/groups/", {"name": "0000", "slug": "digits"}, format="json")
    assert response.status_code == 400
    assert "needs at least one letter" in response.json()["errors"]["name"][0]
    response = api.post("/api/v1/groups/", {"name": "Lab\x07", "slug": "bell"}, format="json")
    assert response.status_code == 400 and "control character" in response.json()["errors"]["name"][0]
    assert not Group.objects.exists()

    assert api.post("/api/v1/groups/", {"name": "  Vision lab ", "slug": "vision"}, format="json").status_code == 201
    assert Group.objects.get().name == "Vision lab"


@pytest.mark.django_db
def test_the_admin_refuses_a_bad_name_and_keeps_the_old_one(verified_alice, admin_user):
    group = actions.create_group(verified_alice, name="Vision lab", slug="vision")
    admin_user.is_staff = admin_user.is_superuser = True
    admin_user.save()
    client = Client()
    client.force_login(admin_user)
    url = f"/django-admin/groups/group/{group.pk}/change/"
    data = change_form_data(client.get(url))
    response = client.post(url, {**data, "name": "\u202e" + "0" * 30})
    assert response.status_code == 200 and "invisible formatting character" in response.content.decode()
    group.refresh_from_db()
    assert group.name == "Vision lab"
    response = client.post(url, {**data, "name": "Vision lab (ETH)"})
    assert response.status_code == 302
    group.refresh_from_db()
    assert group.name == "Vision lab (ETH)"


@pytest.mark.django_db
def test_a_user_with_only_the_default_organisation_is_offered_no_field(verified_alice, settings):
    browser = Client()
    browser.force_login(verified_alice)
    page = browser.get("/groups/").content.decode()
    assert 'name="organization"' not in page and "data-organization-fixed" in page
    created = browser.post("/groups/", {"name": "Lab", "slug": "lab"})
    assert created.status_code == 302
    assert Group.objects.get().organization == settings.GROUP_DEFAULT_ORGANIZATION


@pytest.mark.django_db
def test_a_user_picks_an_existing_organisation_and_cannot_make_a_new_one(verified_alice, admin_user):
    actions.create_group(admin_user, name="Uni lab", slug="unilab", organization="uni")
    browser = Client()
    browser.force_login(verified_alice)
    page = browser.get("/groups/").content.decode()
    assert '<select id="id_organization" name="organization">' in page
    assert '<option value="uni">uni</option>' in page and '<option value="pool" selected>pool</option>' in page
    refused = browser.post("/groups/", {"name": "Mine", "slug": "mine", "organization": "newuni"})
    assert refused.status_code == 400 and "Choose one of the organisations listed" in refused.content.decode()
    assert browser.post("/groups/", {"name": "Mine", "slug": "mine", "organization": "uni"}).status_code == 302
    assert Group.objects.get(slug="mine").organization == "uni"


@pytest.mark.django_db
def test_an_admin_names_a_new_organisation(admin_user):
    browser = Client()
    browser.force_login(admin_user)
    page = browser.get("/groups/").content.decode()
    assert '<input id="id_organization" name="organization"' in page and 'list="known-organizations"' in page
    assert browser.post("/groups/", {"name": "Lab", "slug": "lab", "organization": "acme"}).status_code == 302
    assert Group.objects.get().organization == "acme"
    refused = browser.post("/groups/", {"name": "Lab 2", "slug": "lab2", "organization": "Not A Slug"})
    assert refused.status_code == 400 and 'data-field-error="organization"' in refused.content.decode()


@pytest.mark.django_db
def test_a_refusal_of_the_action_lands_on_its_field(verified_alice, settings):
    settings.GROUPS_PER_USER = 1
    browser = Client()
    browser.force_login(verified_alice)
    assert browser.post("/groups/", {"name": "Lab", "slug": "lab"}).status_code == 302
    taken = browser.post("/groups/", {"name": "Lab 2", "slug": "lab"})
    assert taken.status_code == 400
    assert "You have created 1 groups, the most one may." in taken.content.decode()
    assert Group.objects.count() == 1
