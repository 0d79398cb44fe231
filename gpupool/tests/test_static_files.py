"""Static files as collectstatic leaves them: hashed names cached for a year, gzip and brotli
copies served to a browser that asks (Plotly's 4.8 MB bundle among them)."""

import pytest
from django.core.management import call_command
from django.templatetags.static import static
from django.test import Client

MANIFEST = "whitenoise.storage.CompressedManifestStaticFilesStorage"


@pytest.fixture
def collected(settings, tmp_path):
    settings.STATIC_ROOT = tmp_path / "static"
    settings.STORAGES = {**settings.STORAGES, "staticfiles": {"BACKEND": MANIFEST}}
    call_command("collectstatic", "--noinput", verbosity=0)
    return settings.STATIC_ROOT


def _get(url: str, encoding: str):
    return Client().get(url, HTTP_ACCEPT_ENCODING=encoding)


def _body_size(response) -> int:
    return sum(len(piece) for piece in response.streaming_content)


@pytest.mark.django_db
def test_hashed_names_are_cached_for_a_year_and_files_served_compressed_when_asked(collected, settings):
    settings.DEBUG = False
    url = static("vendor/plotly.min.js")
    assert url.startswith("/static/vendor/plotly.min.") and url != "/static/vendor/plotly.min.js"
    plain = _get(url, "")
    assert plain.status_code == 200 and "Content-Encoding" not in plain
    assert "immutable" in plain["Cache-Control"] and "max-age=315360000" in plain["Cache-Control"]
    size = _body_size(plain)
    assert size > 4_000_000
    for asked, given in (("gzip, deflate, br", "br"), ("gzip", "gzip")):
        answer = _get(url, asked)
        assert answer.status_code == 200 and answer["Content-Encoding"] == given
        assert _body_size(answer) < size / 3
        assert "Accept-Encoding" in answer["Vary"]
    # make dev's shape: DEBUG on, pages name the plain files, still served compressed from
    # STATIC_ROOT (where the copies are, not the folders collectstatic copies from).
    settings.DEBUG = True
    settings.WHITENOISE_USE_FINDERS = False
    assert static("js/job_live.js") == "/static/js/job_live.js"
    answer = _get("/static/vendor/plotly.min.js", "br")
    assert answer.status_code == 200 and answer["Content-Encoding"] == "br"


@pytest.mark.django_db
def test_the_icon_is_there_for_pages_and_for_browsers_that_ask_for_favicon_ico(client):
    answer = client.get("/favicon.ico")
    assert answer.status_code == 302 and answer["Location"] == static("favicon.svg")
    assert client.get(answer["Location"]).status_code == 200
    assert f'rel="icon" href="{static("favicon.svg")}"' in client.get("/accounts/login/").content.decode()
