"""The one ASGI application a web process serves (gpupool/serve.py): WebSockets (Channels), two bare ingest paths, and
every other HTTP request through Django's synchronous handler, each on a thread of its own
(gpupool/asgi_http.py: why not Django's ASGI handler)."""

import os
import sys

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "gpupool.settings")
# Django must be set up before importing anything that touches models.
django_wsgi_app = get_wsgi_application()

from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from channels.security.websocket import AllowedHostsOriginValidator  # noqa: E402
from django.conf import settings  # noqa: E402
from django.urls import path, re_path  # noqa: E402

from gpupool.asgi_http import DjangoHttp  # noqa: E402
from gpupool.body_limit import BodyLimit  # noqa: E402
from gpupool.flow_budget import FlowBudget  # noqa: E402
from gpupool.health import health_app  # noqa: E402
from gpupool.routing import websocket_urlpatterns  # noqa: E402
from gpupool.socket_auth import SignedInSockets  # noqa: E402
from interactive.proxy import session_proxy  # noqa: E402
from interactive.routing import SessionHosts, is_session_host  # noqa: E402
from jobs.slurm_events.asgi import events_app  # noqa: E402
from telemetry.asgi_ingest import ingest_app  # noqa: E402

# A thread waiting for the GIL gets it within WEB_GIL_SWITCH_SECONDS, not CPython's 5 ms: a web
# process writes a mass change's batch (jobs/slurm_events/asgi.py) or renders a page beside
# requests that are mostly round trips to PostgreSQL and Redis, and each round trip's return
# waited up to a whole interval behind it.
sys.setswitchinterval(settings.WEB_GIL_SWITCH_SECONDS)

django_http_app = DjangoHttp(django_wsgi_app, threads=settings.HTTP_THREADS)

portal_application = ProtocolTypeRouter(
    {
        "http": URLRouter(
            [
                # Node agents' batches skip Django's middleware (telemetry/asgi_ingest.py).
                path("api/v1/telemetry/ingest", ingest_app),
                # slurmctld's job events, signed in their headers (jobs/slurm_events/asgi.py).
                path("api/v1/slurm/events", events_app),
                # For the reverse proxy and supervisors: no host check, no HTTPS redirect (gpupool/health.py).
                path("healthz", health_app),
                path("readyz", health_app),
                re_path(r"", django_http_app),
            ]
        ),
        "websocket": AllowedHostsOriginValidator(SignedInSockets(URLRouter(websocket_urlpatterns))),
    }
)

# Interactive sessions' own host names (s-<key>.SESSIONS_DOMAIN) go to their proxy, before the
# portal's host and origin checks (interactive/routing.py); everything else is the portal.
# Bodies over the host's limit are refused before they are read (gpupool/body_limit.py); the
# response bytes a process has in flight are capped, and a reader that takes nothing is cut
# off (gpupool/flow_budget.py).
application = FlowBudget(
    BodyLimit(
        SessionHosts(session_proxy, portal_application),
        lambda scope: settings.SESSION_MAX_BODY_BYTES if is_session_host(scope) else settings.MAX_REQUEST_BODY_BYTES,
    ),
    limit_bytes=settings.WEB_BYTES_IN_FLIGHT,
    stall_seconds=settings.HTTP_STREAM_STALL_SECONDS,
)
