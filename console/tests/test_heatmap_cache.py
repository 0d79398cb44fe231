"""The heatmap's shared picture (console/heatmap.py) on the real Redis cache: many viewers
missing together cost one build, and the picture is rebuilt once it expires."""

import threading
import time

import pytest
from django.conf import settings
from django.core.cache import caches

from console import heatmap

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def counted_builds(monkeypatch):
    builds = []

    def slow_build():
        builds.append(threading.get_ident())
        time.sleep(0.3)  # long enough for every viewer below to miss while it runs
        return {"generated": f"build {len(builds)}", "sources": [], "nodes": [], "jobs": []}

    monkeypatch.setattr(heatmap, "build_shared_heatmap", slow_build)
    cache = caches[settings.HEATMAP_CACHE]
    cache.delete(heatmap.CACHE_KEY)
    cache.delete(heatmap.BUILD_LOCK_KEY)
    yield builds
    cache.delete(heatmap.CACHE_KEY)


def test_twenty_viewers_missing_together_cost_one_build(counted_builds):
    results, start = [], threading.Barrier(20)

    def viewer():
        start.wait()
        results.append(heatmap.shared_heatmap()["generated"])

    threads = [threading.Thread(target=viewer) for _ in range(20)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    assert len(counted_builds) == 1
    assert results == ["build 1"] * 20  # the waiters read the builder's picture


def test_the_picture_is_rebuilt_after_it_expires(counted_builds, settings):
    settings.HEATMAP_CACHE_SECONDS = 1
    assert heatmap.shared_heatmap()["generated"] == "build 1"
    assert heatmap.shared_heatmap()["generated"] == "build 1"  # from the cache
    time.sleep(1.2)
    assert heatmap.shared_heatmap()["generated"] == "build 2"
    assert len(counted_builds) == 2
