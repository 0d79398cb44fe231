import json
import time

from channels.generic.websocket import AsyncJsonWebsocketConsumer

from foundation.async_db import SOCKETS_DB
from jobs.live.events import job_group, user_control_group, user_group
from jobs.live.watching import watch
from jobs.models import Job, JobState


class JobStatusConsumer(AsyncJsonWebsocketConsumer):
    """Streams the signed-in user's job updates; a socket only ever joins its own group.

    Messages come encoded by their publisher (jobs/live/events.py), once for all the user's
    pages. A page that asks for batches (`/ws/jobs/?batches=1`, the portal's own scripts) hears
    a mass change as one message of many jobs; others hear each job on its own. A job's page
    asks for its job alone (`job=<id>`)."""

    async def connect(self):
        user = self.scope.get("user")
        # The user was read (active, session hash checked) by the sign-in just now
        # (gpupool/socket_auth.py): no second query.
        if user is None or not user.is_authenticated:
            await self.close(code=4401)
            return
        asked = self.scope.get("query_string", b"").split(b"&")
        self.batches = b"batches=1" in asked
        # A job's own page hears that job alone (`job=<id>`, one of the user's own): a user's
        # 500 tabs of job pages are not each sent every change of every job.
        self.only_job = next((int(part[4:]) for part in asked if part[:4] == b"job=" and part[4:].isdigit()), None)
        if self.only_job is None:
            self.groups_joined = [user_group(user.pk)]
        elif await _owns(user.pk, self.only_job):
            self.groups_joined = [job_group(self.only_job), user_control_group(user.pk)]
        else:
            await self.close(code=4404)  # not theirs, or gone: the page polls instead
            return
        for group in self.groups_joined:
            await self.channel_layer.group_add(group, self.channel_name)
        await self.accept()
        await _watch_pending_now_and_then(user.pk)

    async def disconnect(self, code):
        for group in getattr(self, "groups_joined", ()):
            await self.channel_layer.group_discard(group, self.channel_name)

    async def receive_json(self, content, **kwargs):
        # The open page says it is still looking every 30 s: its pending jobs' expected
        # starts stay fresh (jobs/live/watching.py). Anything else from the browser is ignored.
        if isinstance(content, dict) and content.get("type") == "watch":
            await _watch_pending_now_and_then(self.scope["user"].pk)

    async def job_update(self, event):
        await self.send(text_data=event.get("text") or json.dumps({"type": "job", "job": event["job"]}))

    async def jobs_update(self, event):
        # Many jobs changed at once (publish_job_updates).
        if self.batches and "text" in event:
            await self.send(text_data=event["text"])
            return
        for text in event.get("texts") or [json.dumps({"type": "job", "job": job}) for job in event["jobs"]]:
            await self.send(text_data=text)

    async def session_update(self, event):
        # An interactive session's state (interactive/events.py): its page and the jobs list.
        await self.send_json({"type": "session", "session": event["session"]})

    async def account_closed(self, event):
        # 4403: the account was deactivated; the page's script stops reconnecting.
        await self.close(code=4403)


# A user's pending jobs are watched for WATCH_SECONDS (60 s) each time; one of their pages
# connecting or saying it is still looking renews that at most this often per process: a
# team's wall of 100 pages was 100 queries on connect, and 100 every 30 s.
WATCH_RENEW_SECONDS = 20
_watched_at: dict[int, float] = {}


async def _watch_pending_now_and_then(user_id: int) -> None:
    now = time.monotonic()
    if now - _watched_at.get(user_id, -WATCH_RENEW_SECONDS) < WATCH_RENEW_SECONDS:
        return
    if len(_watched_at) > 100_000:
        _watched_at.clear()
    _watched_at[user_id] = now
    await _watch_pending(user_id)


# A page shows at most this many of a user's jobs.
WATCHED_PER_USER = 100


@SOCKETS_DB
def _owns(user_id: int, job_id: int) -> bool:
    return Job.objects.filter(pk=job_id, owner_id=user_id).exists()


@SOCKETS_DB
def _watch_pending(user_id: int) -> None:
    pending = Job.objects.filter(owner_id=user_id, state=JobState.PENDING).order_by("-id")[:WATCHED_PER_USER]
    watch(pending.values_list("pk", flat=True))
