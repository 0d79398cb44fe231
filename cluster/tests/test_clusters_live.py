"""Several clusters in one portal: both dev generations probed side by side with their real
releases and REST versions, a cluster that never answers shown down, one that stops answering
shown stale (on the API and as a banner on every user's page) and up again once it answers."""

from dataclasses import replace
from urllib.parse import urlsplit

import pytest
from django.urls import reverse

from cluster.clusters import probing
from cluster.clusters.services import api_version
from testing.tcp_forwarder import TcpForwarder

pytestmark = [pytest.mark.slurm, pytest.mark.django_db]


def _clusters(client):
    response = client.get("/api/v1/clusters/")
    assert response.status_code == 200, response.content
    return {row["name"]: row for row in response.json()}


def test_both_generations_answer_side_by_side_and_a_cluster_that_stops_is_stale(
    settings, other_generation, alice, marketer, admin_user, api_client_for, client
):
    target = urlsplit(other_generation.slurmrestd_url)
    with TcpForwarder(target.hostname, target.port) as path:
        other = replace(other_generation, name="site-b", slurmrestd_url=path.url)
        gone = replace(other_generation, name="site-gone", slurmrestd_url="http://127.0.0.1:9")  # nothing listens
        settings.EXTRA_CLUSTERS = (other, gone)
        results = {result.name: result for result in probing.probe_all()}
        assert results["site-b"].answering and not results["site-gone"].answering

        shown = _clusters(api_client_for(alice))
        assert list(shown) == [settings.SLURM_CLUSTER_NAME, "site-b", "site-gone"]
        own = shown[settings.SLURM_CLUSTER_NAME]
        assert own["state"] == "up" and own["primary"] and own["slurm_release"].startswith(settings.SLURM_RELEASE)
        assert own["rest_version"] == api_version()
        other_release = other_generation.name.removeprefix("slurm-")
        assert shown["site-b"]["state"] == "up" and shown["site-b"]["slurm_release"].startswith(other_release)
        assert shown["site-b"]["rest_version"] == api_version("site-b") != ""
        assert shown["site-gone"]["state"] == "down" and shown["site-gone"]["stale_since"] is not None
        assert shown["site-gone"]["error"] is None  # why is for admins
        assert "127.0.0.1:9" in _clusters(api_client_for(admin_user))["site-gone"]["error"]
        answered_at = shown["site-b"]["checked_at"]

        path.stop()  # site-b's network goes
        results = {result.name: result for result in probing.probe_all()}
        assert not results["site-b"].answering and results[settings.SLURM_CLUSTER_NAME].answering

    shown = _clusters(api_client_for(alice))
    assert shown["site-b"]["state"] == "stale" and shown["site-b"]["stale_since"] == answered_at
    assert shown[settings.SLURM_CLUSTER_NAME]["state"] == "up"
    client.force_login(alice)
    page = client.get(reverse("jobs:list")).content.decode()
    assert "Cluster <strong>site-b</strong> is not answering" in page and "stale since" in page
    assert "Cluster <strong>site-gone</strong> is not answering" in page
    client.force_login(marketer)  # marketing's pages show no cluster
    assert "is not answering" not in client.get(reverse("console:home")).content.decode()

    # It answers again (on its own address now). A cluster that failed rests between probes
    # (CLUSTER_PROBE_FAILING_INTERVAL_SECONDS): the next tick leaves it stale; once its pause is
    # over, it is up and the banner is gone.
    settings.EXTRA_CLUSTERS = (replace(other, slurmrestd_url=other_generation.slurmrestd_url),)
    assert "site-b" not in {result.name for result in probing.probe_all()}
    assert _clusters(api_client_for(alice))["site-b"]["state"] == "stale"
    settings.CLUSTER_PROBE_FAILING_INTERVAL_SECONDS = 0
    probing.probe_all()
    shown = _clusters(api_client_for(alice))
    assert list(shown) == [settings.SLURM_CLUSTER_NAME, "site-b"]  # site-gone left the file: gone from the list
    assert shown["site-b"]["state"] == "up" and shown["site-b"]["stale_since"] is None
    client.force_login(alice)
    assert "is not answering" not in client.get(reverse("jobs:list")).content.decode()


def test_the_clusters_list_needs_a_signed_in_caller(client):
    assert client.get("/api/v1/clusters/").status_code in (401, 403)
