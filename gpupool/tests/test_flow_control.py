"""A real web process (gpupool/serve.py) against clients that take nothing or send too much: its
memory stays where it was (bench/flow_control.py has the figures with larger sizes)."""

import time

import pytest

from interactive import origins
from interactive.tests.upstream import session_on, upstream_server
from testing.attacks import large_dataset_file, peak_rss_mb, post_body, rss_mb, stalled_readers
from testing.servers import portal_processes

pytestmark = pytest.mark.django_db(transaction=True)

MB = 1024 * 1024


def _settle(pid: int) -> float:
    """The process's memory once a first request has warmed it (imports, a thread, a connection)."""
    time.sleep(0.5)
    return rss_mb(pid)


def test_stalled_readers_of_an_endless_notebook_answer_and_a_large_file_hold_no_memory(alice, settings, tmp_path):
    from accounts.models import ApiToken

    _token, key = ApiToken.issue(alice, "downloads")
    file_path = large_dataset_file(alice, 160 * MB)
    with upstream_server() as (http_port, _ws, _server):
        session = session_on(alice, port=http_port)
        cookie = f"{origins.SESSION_COOKIE}={origins.cookie_value(session.pk, alice)}"
        env = {"DATASET_STORE": str(settings.DATASET_STORE)}
        with portal_processes(extra_env=env) as (base_url, pid):
            port = int(base_url.rsplit(":", 1)[1])
            session_host = origins.session_host(session.host_key)
            with stalled_readers(port, "/healthz", host="127.0.0.1") as firsts:
                assert firsts == ["HTTP/1.1 200 OK"]
            before = _settle(pid)
            with stalled_readers(port, "/endless", host=session_host, headers={"Cookie": cookie}, count=2) as firsts:
                assert firsts == ["HTTP/1.1 200 OK"] * 2
                notebook_peak = peak_rss_mb(pid, 6)
            auth = {"Authorization": f"Bearer {key}"}
            with stalled_readers(port, file_path, host="127.0.0.1", headers=auth, count=2) as firsts:
                assert firsts == ["HTTP/1.1 200 OK"] * 2
                file_peak = peak_rss_mb(pid, 4)
            after = _settle(pid)
    # Under Daphne the notebook's two readers took the process up by over 1 GB in 12 s, and the
    # file's by its size each.
    assert notebook_peak - before < 50, (before, notebook_peak)
    assert file_peak - before < 50, (before, file_peak)
    assert after - before < 50, (before, after)


def test_bodies_over_the_limit_are_refused_before_they_are_read(alice):
    with portal_processes() as (base_url, pid):
        port = int(base_url.rsplit(":", 1)[1])
        post_body(port, "/api/v1/jobs/", host="127.0.0.1", size=1024)  # warm
        before = _settle(pid)
        # 400 MB declared, unauthenticated: refused from its Content-Length alone.
        status, sent = post_body(port, "/api/v1/jobs/", host="127.0.0.1", size=400 * MB)
        assert status == 413 and sent < 400 * MB
        # The same without a length (chunked): cut off once past the limit.
        status, sent = post_body(port, "/api/v1/jobs/", host="127.0.0.1", size=400 * MB, chunked=True)
        assert status == 413 and sent < 400 * MB
        # To a session host name that names nothing: its own, larger, limit, still refused.
        nowhere = origins.session_host("0" * 16)
        status, sent = post_body(port, "/api/", host=nowhere, size=300 * MB)
        assert status == 413 and sent < 300 * MB
        grown = rss_mb(pid) - before
        # A body under the limit still reaches the portal, which answers it (not JSON it can use).
        status, _sent = post_body(port, "/api/v1/jobs/", host="127.0.0.1", size=64 * 1024)
        assert status in (400, 401)
    assert grown < 20, grown
