"""slurmrestd upgraded under a running portal: the API version the portal settled on is gone. The real
daemon's answer for it (a plain-text 404) is a transient error, never a missing job, and the next
client asks the daemon again what it serves and speaks that."""

import pytest
from django.conf import settings

from cluster.clusters import services
from cluster.errors import SlurmNotFound, SlurmTransientError
from cluster.slurmrest.base import ServedApi
from cluster.slurmrest.registry import ADAPTERS

pytestmark = pytest.mark.slurm


def test_a_version_the_daemon_no_longer_serves_is_read_again_and_nothing_reads_as_missing():
    key = (settings.SLURMRESTD_URL, settings.SLURM_JWT_KEY_FILE)
    real = services.served_api()
    gone = next(version for version in ADAPTERS if version not in real.versions)
    # What the portal read before the upgrade: a version this daemon does not serve.
    services._served_apis[key] = ServedApi(release="before the upgrade", versions=(gone,))
    try:
        stale = services.rest_client()
        assert stale.adapter.version == gone
        with pytest.raises(SlurmTransientError, match="no longer serves") as raised:
            stale.get_job(1)
        assert not isinstance(raised.value, SlurmNotFound)  # a job is never taken as gone for it
        assert key not in services._served_apis  # forgotten: the next client asks again
        fresh = services.rest_client()
        assert fresh.adapter.version in real.versions and fresh.adapter.version != gone
        assert fresh.ping() is True
    finally:
        services._served_apis.pop(key, None)
