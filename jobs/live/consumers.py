from channels.generic.websocket import AsyncJsonWebsocketConsumer

from foundation.async_db import SOCKETS_DB
from jobs.live.events import user_group
from jobs.live.watching import watch
from jobs.models import Job, JobState


class JobStatusConsumer(AsyncJsonWebsocketConsumer):
    """Streams the signed-in user's job updates; a socket only ever joins its own group."""

    async def connect(self):
        user = self.scope.get("user")
        # The user was read (active, session hash checked) by the sign-in just now
        # (gpupool/socket_auth.py): no second query.
        if user is None or not user.is_authenticated:
            await self.close(code=4401)
            return
        self.group = user_group(user.pk)
        await self.channel_layer.group_add(self.group, self.channel_name)
        await self.accept()
        await _watch_pending(user.pk)

    async def disconnect(self, code):
        if hasattr(self, "group"):
            await self.channel_layer.group_discard(self.group, self.channel_name)

    async def receive_json(self, content, **kwargs):
        # The open page says it is still looking every 30 s: its pending jobs' expected
        # starts stay fresh (jobs/live/watching.py). Anything else from the browser is ignored.
        if isinstance(content, dict) and content.get("type") == "watch":
            await _watch_pending(self.scope["user"].pk)

    async def job_update(self, event):
        await self.send_json({"type": "job", "job": event["job"]})

    async def jobs_update(self, event):
        # Many jobs changed at once (publish_job_updates): the browser hears them one by one,
        # as it does any update.
        for job in event["jobs"]:
            await self.send_json({"type": "job", "job": job})

    async def session_update(self, event):
        # An interactive session's state (interactive/events.py): its page and the jobs list.
        await self.send_json({"type": "session", "session": event["session"]})

    async def account_closed(self, event):
        # 4403: the account was deactivated; the page's script stops reconnecting.
        await self.close(code=4403)


# A page shows at most this many of a user's jobs.
WATCHED_PER_USER = 100


@SOCKETS_DB
def _watch_pending(user_id: int) -> None:
    pending = Job.objects.filter(owner_id=user_id, state=JobState.PENDING).order_by("-id")[:WATCHED_PER_USER]
    watch(pending.values_list("pk", flat=True))
