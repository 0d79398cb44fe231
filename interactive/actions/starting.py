"""From a session's job running to its server answering: where it listens, and when it is up.

The job's first output says the port (interactive/kinds.py, PORT_LINE); the node's address is
Slurm's NodeAddr as the mirror last read it (cluster.models.Node.address), else its name. The
server is up when its status path answers 200 to the session's token. Each check is one bounded
read of the job's log (symlink-safe: jobs.logs) and one short HTTP request; the caller repeats it.
"""

from __future__ import annotations

import logging
import time
from decimal import Decimal

import httpx
from django.conf import settings
from django.db import transaction
from django.utils import timezone

from cluster.clusters.services import rest_client
from cluster.errors import SlurmError
from cluster.models import Node
from cluster.records.hostlist import expand_hostlist
from interactive.actions import stop
from interactive.events import publish_session
from interactive.kinds import PORT_LINE, kind_for
from interactive.models import InteractiveSession
from jobs import protocol
from jobs.logs import local_log_path, read_head
from jobs.models import JobState

log = logging.getLogger(__name__)

# The port line comes before anything the app prints: the head of the log is enough.
HEAD_BYTES = 64 * 1024
PROBE_SECONDS = 2.0
ANSWER_MAX_BYTES = 1024 * 1024


def port_from_output(text: str) -> int | None:
    for line in text.splitlines():
        if line.startswith(PORT_LINE):
            value = line[len(PORT_LINE) :].strip()
            if value.isdigit() and 1024 <= int(value) <= 65535:
                return int(value)
            return None
    return None


def node_address(nodes: str) -> str:
    """The first node's NodeAddr: the mirror's copy, else Slurm's own answer (a node the mirror has
    not read yet), else its name."""
    names = expand_hostlist(nodes) if nodes else []
    if not names:
        return ""
    address = Node.objects.filter(name=names[0]).values_list("address", flat=True).first()
    if not address:
        try:
            address = next((node.address for node in rest_client().list_nodes() if node.name == names[0]), "")
        except SlurmError:
            address = ""
    return address or names[0]


def ask_server(address: str, port: int, token: str, path: str) -> tuple[int, bytes] | None:
    """One short GET to a session's server with its token: (status, body), or None when it does
    not answer within PROBE_SECONDS in all or says more than ANSWER_MAX_BYTES. Whatever listens
    there is the user's job's to choose: it gets no more of a worker than that."""
    deadline = time.monotonic() + PROBE_SECONDS
    body = bytearray()
    try:
        with httpx.stream(
            "GET",
            f"http://{url_host(address)}:{port}{path}",
            headers={"Authorization": f"token {token}"},
            timeout=PROBE_SECONDS,
        ) as response:
            for chunk in response.iter_bytes():
                body += chunk
                if len(body) > ANSWER_MAX_BYTES or time.monotonic() > deadline:
                    return None
            return response.status_code, bytes(body)
    except httpx.HTTPError:
        return None


def probe(address: str, port: int, token: str, path: str) -> bool:
    answer = ask_server(address, port, token, path)
    return answer is not None and answer[0] == 200


def url_host(address: str) -> str:
    return f"[{address}]" if ":" in address else address


def check_start(session_id: int) -> str:
    """One look at a starting session: "ready", "starting", "queued", "ended" or "failed"."""
    session = InteractiveSession.objects.select_related("job").filter(pk=session_id).first()
    if session is None:
        return "ended"
    job = session.job
    if session.ready_at is not None:
        return "ready"
    if job.is_final or session.stop_reason:
        return "ended"
    if session.error:
        return "failed"
    if job.state != JobState.RUNNING:
        return "queued"
    kind = kind_for(session.kind)
    if session.port is None:
        output = read_head(local_log_path(f"{protocol.job_directory(job)}/stdout.log", job.cluster_user), HEAD_BYTES)
        port = port_from_output(output)
        if port is None:
            return _starting_too_long(session)
        address = node_address(job.nodes)
        if not address:
            return "starting"
        InteractiveSession.objects.filter(pk=session.pk, port__isnull=True).update(port=port, address=address)
        session.port, session.address = port, address
    if not probe(session.address, session.port, session.token, kind.status_path):
        return _starting_too_long(session)
    now = timezone.now()
    started = job.start_time or now
    seconds = Decimal(max(0.0, (now - started).total_seconds())).quantize(Decimal("0.001"))
    with transaction.atomic():
        marked = InteractiveSession.objects.filter(pk=session.pk, ready_at__isnull=True).update(
            ready_at=now, last_activity_at=now, server_start_seconds=seconds
        )
        if marked:
            transaction.on_commit(lambda: publish_session(session.pk))
    return "ready"


def _starting_too_long(session: InteractiveSession) -> str:
    """A server that has not answered SESSION_START_TIMEOUT_SECONDS after its job started never will
    (a broken image, a crashed server): the job is cancelled and the session says why."""
    started = session.job.start_time
    if started is None or (timezone.now() - started).total_seconds() < settings.SESSION_START_TIMEOUT_SECONDS:
        return "starting"
    message = (
        f"The {kind_for(session.kind).title} server did not answer within "
        f"{settings.SESSION_START_TIMEOUT_SECONDS // 60} minutes of its job starting; see the job's output."
    )
    if InteractiveSession.objects.filter(pk=session.pk, error="", ready_at__isnull=True).update(error=message):
        try:
            stop(session, reason="")
        except Exception:
            log.exception("session %s: could not cancel the job of a server that never answered", session.pk)
        publish_session(session.pk)
    return "failed"
