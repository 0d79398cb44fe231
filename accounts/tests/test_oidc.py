"""Sign-in through an institution's OpenID Connect provider: a real provider
(oidc-provider-mock) runs in the test process; the whole authorization-code flow with PKCE,
the groups claim applied at every sign-in, and signing out at the provider too. No network."""

from urllib.parse import parse_qs, quote, urlparse

import httpx
import pytest
from allauth.account.models import EmailAddress
from django.contrib.auth import get_user_model
from django.core.cache import cache

from gpupool.settings import oidc_providers
from groups.models import Group, Membership

oidc_provider_mock = pytest.importorskip("oidc_provider_mock")

pytestmark = pytest.mark.django_db
PROVIDER = "institution"


@pytest.fixture
def provider(settings):
    with oidc_provider_mock.run_server_in_thread() as server:
        url = f"http://localhost:{server.server_port}"
        settings.OIDC_SERVER_URL = url
        settings.OIDC_CLIENT_ID = "gpupool-portal"
        settings.SOCIALACCOUNT_PROVIDERS = oidc_providers(url, "gpupool-portal", "secret")
        cache.clear()  # the provider's discovery document is kept per URL
        yield url


def _claims(provider: str, sub: str, **claims) -> None:
    response = httpx.put(f"{provider}/users/{quote(sub)}", json={"email": sub, "email_verified": True, **claims})
    assert response.status_code == 204


def _sign_in(client, provider: str, sub: str):
    started = client.post(f"/accounts/oidc/{PROVIDER}/login/")
    assert started.status_code == 302 and started["Location"].startswith(f"{provider}/oauth2/authorize")
    query = parse_qs(urlparse(started["Location"]).query)
    assert query["code_challenge_method"] == ["S256"] and query["code_challenge"][0]  # PKCE
    authorized = httpx.post(started["Location"], data={"sub": sub})
    assert authorized.status_code in (302, 303), authorized.text
    back = urlparse(authorized.headers["location"])
    assert back.path == f"/accounts/oidc/{PROVIDER}/login/callback/"
    return client.get(f"{back.path}?{back.query}")


@pytest.fixture
def vision(alice):
    # Tied by an admin to the claim's value (Keycloak sends group paths).
    return Group.objects.create(
        name="Vision lab", slug="vision", organization="pool", created_by=alice, claim_value="/gpu/vision"
    )


def test_a_new_user_signs_in_at_the_institution_and_lands_in_the_claimed_group(client, provider, vision):
    # "vision" is only a short name: a group's slug never answers a claim, its claim value does.
    _claims(provider, "carol@uni.edu", preferred_username="carol", groups=["/gpu/vision", "vision", "/other"])
    finished = _sign_in(client, provider, "carol@uni.edu")
    assert finished.status_code == 302, finished.content[:500]
    carol = get_user_model().objects.get(email="carol@uni.edu")
    assert client.session["_auth_user_id"] == str(carol.pk)
    assert EmailAddress.objects.filter(user=carol, email="carol@uni.edu", verified=True).exists()
    member = Membership.objects.active().get(user=carol)  # one: the slug "vision" joined nothing more
    assert member.group == vision and member.via_claim and member.role == "member"

    # The claim no longer names the group: at the next sign-in the membership ends.
    client.logout()
    _claims(provider, "carol@uni.edu", preferred_username="carol", groups=[])
    assert _sign_in(client, provider, "carol@uni.edu").status_code == 302
    assert not Membership.objects.active().filter(user=carol).exists()


def test_an_invited_membership_is_not_ended_by_the_claim(client, provider, vision):
    _claims(provider, "dan@uni.edu", preferred_username="dan", groups=[])
    _sign_in(client, provider, "dan@uni.edu")
    dan = get_user_model().objects.get(email="dan@uni.edu")
    Membership.objects.create(group=vision, user=dan)  # joined by invitation
    client.logout()
    _sign_in(client, provider, "dan@uni.edu")
    assert Membership.objects.active().filter(user=dan, group=vision).exists()


def test_signing_out_ends_the_providers_session_too(client, provider, vision, alice):
    _claims(provider, "erin@uni.edu", preferred_username="erin", groups=["/gpu/vision"])
    _sign_in(client, provider, "erin@uni.edu")
    out = client.post("/accounts/logout/")
    assert out.status_code == 302
    target = urlparse(out["Location"])
    assert f"{target.scheme}://{target.netloc}{target.path}" == f"{provider}/oauth2/end_session"
    query = parse_qs(target.query)
    assert query["client_id"] == ["gpupool-portal"]
    assert query["post_logout_redirect_uri"][0].endswith("/accounts/login/")
    assert "_auth_user_id" not in client.session
    # A local sign-in's sign-out stays in the portal.
    client.force_login(alice)
    assert client.post("/accounts/logout/")["Location"] == "/accounts/login/"


def test_the_sign_in_page_offers_the_institution_only_when_configured(client, settings):
    assert b"/accounts/oidc/" not in client.get("/accounts/login/").content
    with oidc_provider_mock.run_server_in_thread() as server:
        url = f"http://localhost:{server.server_port}"
        settings.SOCIALACCOUNT_PROVIDERS = oidc_providers(url, "gpupool-portal", "secret")
        page = client.get("/accounts/login/").content.decode()
    assert f"/accounts/oidc/{PROVIDER}/login/" in page and "your institution" in page


def test_the_claim_does_not_put_back_someone_who_left_or_was_removed(client, provider, vision, alice):
    from groups import actions

    _claims(provider, "fay@uni.edu", preferred_username="fay", groups=["/gpu/vision"])
    _sign_in(client, provider, "fay@uni.edu")
    fay = get_user_model().objects.get(email="fay@uni.edu")
    Membership.objects.create(group=vision, user=alice, role="pi")
    actions.remove_member(vision.pk, alice, fay.pk)
    client.logout()
    _sign_in(client, provider, "fay@uni.edu")
    assert not Membership.objects.active().filter(user=fay).exists()
