"""The lab administrator's view: admins only; with Slurm unreachable the page still lists
every group and says why its Slurm columns are empty (the figures themselves are tested on the
real cluster in groups/tests/test_groups_slurm.py)."""

import pytest
from django.core.cache import cache

from groups.models import Group

pytestmark = pytest.mark.django_db


@pytest.fixture
def groups(alice):
    return [
        Group.objects.create(name=name, slug=slug, organization="pool", created_by=alice)
        for name, slug in (("Vision lab", "vision"), ("NLP group", "nlp"))
    ]


def test_only_admins_see_the_groups_side_by_side(client, alice, marketer, admin_user, groups):
    for user in (alice, marketer):
        client.force_login(user)
        assert client.get("/console/groups/").status_code == 403
        assert client.get("/console/groups/?format=csv").status_code == 403


def test_without_slurm_every_group_is_listed_with_a_note(client, admin_user, groups, settings):
    settings.SLURM_CLI_PREFIX = ["/nonexistent/slurm-login"]
    cache.clear()
    client.force_login(admin_user)
    page = client.get("/console/groups/").content.decode()
    assert "Vision lab" in page and "NLP group" in page and "Slurm did not answer" in page
    csv_rows = client.get("/console/groups/?format=csv").content.decode().splitlines()
    assert csv_rows[0].startswith("group,slurm_account,members,shares")
    assert {row.split(",")[0] for row in csv_rows[1:]} == {"vision", "nlp"}
