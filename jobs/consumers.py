from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer
from django.contrib.auth import get_user_model

from jobs.events import user_group


class JobStatusConsumer(AsyncJsonWebsocketConsumer):
    """Streams the signed-in user's job updates; a socket only ever joins its own group."""

    async def connect(self):
        user = self.scope.get("user")
        if user is None or not user.is_authenticated or not await _is_active(user.pk):
            await self.close(code=4401)
            return
        self.group = user_group(user.pk)
        await self.channel_layer.group_add(self.group, self.channel_name)
        await self.accept()

    async def disconnect(self, code):
        if hasattr(self, "group"):
            await self.channel_layer.group_discard(self.group, self.channel_name)

    async def job_update(self, event):
        await self.send_json({"type": "job", "job": event["job"]})

    async def account_closed(self, event):
        # 4403: the account was deactivated; the page's script stops reconnecting.
        await self.close(code=4403)


@database_sync_to_async
def _is_active(user_id: int) -> bool:
    return get_user_model().objects.filter(pk=user_id, is_active=True).exists()
