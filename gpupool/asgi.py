import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "gpupool.settings")
# Django must be set up before importing anything that touches models.
django_asgi_app = get_asgi_application()

from channels.auth import AuthMiddlewareStack  # noqa: E402
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from channels.security.websocket import AllowedHostsOriginValidator  # noqa: E402
from django.urls import path, re_path  # noqa: E402

from gpupool.routing import websocket_urlpatterns  # noqa: E402
from jobs.asgi_events import events_app  # noqa: E402
from telemetry.asgi_ingest import ingest_app  # noqa: E402

application = ProtocolTypeRouter(
    {
        "http": URLRouter(
            [
                # Node agents' batches skip Django's middleware (telemetry/asgi_ingest.py).
                path("api/v1/telemetry/ingest", ingest_app),
                # slurmctld's job events, signed in their headers (jobs/asgi_events.py).
                path("api/v1/slurm/events", events_app),
                re_path(r"", django_asgi_app),
            ]
        ),
        "websocket": AllowedHostsOriginValidator(AuthMiddlewareStack(URLRouter(websocket_urlpatterns))),
    }
)
