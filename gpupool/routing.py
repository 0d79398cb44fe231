from django.urls import path

from jobs.live.consumers import JobStatusConsumer

websocket_urlpatterns = [
    path("ws/jobs/", JobStatusConsumer.as_asgi()),
]
