"""/healthz and /readyz (gpupool/health.py): what the reverse proxy and deploy scripts ask a web
process, answered without Django's host check or HTTPS redirect."""

import json

import pytest
from asgiref.sync import async_to_sync
from channels.testing import HttpCommunicator

pytestmark = pytest.mark.django_db(transaction=True)


def _get(path, headers=(), method="GET"):
    from gpupool.asgi import application

    communicator = HttpCommunicator(application, method, path, headers=list(headers))
    response = async_to_sync(communicator.get_response)(timeout=10)
    return response["status"], response["body"]


def test_healthz_answers_for_any_host_and_without_https(settings):
    # A production process: hosts fixed, HTTPS enforced. The proxy's check comes by address.
    settings.ALLOWED_HOSTS = ["gpus.example.org"]
    settings.SECURE_SSL_REDIRECT = True
    status, body = _get("/healthz", headers=[(b"host", b"10.0.0.5:8101")])
    assert status == 200
    assert json.loads(body) == {"status": "ok"}


def test_readyz_reports_the_database_and_redis():
    status, body = _get("/readyz")
    assert status == 200, body
    assert json.loads(body) == {"status": "ok", "database": "ok", "redis": "ok"}


def test_readyz_says_which_dependency_is_down(settings):
    from foundation.redis_client import _client

    # A Redis nobody listens on: the answer names it and is 503, within the short timeout.
    settings.REDIS_URL = "redis://127.0.0.1:1/0"
    _client.cache_clear()
    try:
        status, body = _get("/readyz")
    finally:
        _client.cache_clear()
    assert status == 503
    assert json.loads(body) == {"status": "unavailable", "database": "ok", "redis": "unavailable"}


def test_only_reads_are_answered():
    status, _body = _get("/healthz", method="POST")
    assert status == 405
