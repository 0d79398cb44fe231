"""Starting and stopping sessions: the job and its session row are written together."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django.conf import settings
from django.db import transaction

from interactive.boards import BOARD_FIELDS, board_cluster, board_environment, board_sources
from interactive.kinds import KINDS, kind_for
from interactive.models import InteractiveSession
from jobs import actions as job_actions
from jobs.models import Job
from jobs.submission import intake
from jobs.submission.spec import IMAGE_RE, SpecError

# Job fields a session does not take: the portal writes its command, and a notebook that spot
# capacity could take away mid-thought is not one anybody wants.
NOT_FOR_SESSIONS = {
    "command": "A session runs its app; it takes no command.",
    "spot": "A session cannot be a spot job.",
}


def start(request, data: Mapping[str, Any]) -> InteractiveSession:
    """A new session from the job fields plus `kind`, through the job intake (plan, quota, rate
    limit, group, datasets). Raises what intake.accept raises, having changed nothing."""
    data = dict(data)
    errors: dict[str, list[str]] = {}
    kind = kind_for(data.pop("kind", None))
    if kind is None:
        errors["kind"] = [f"Choose an app: {', '.join(KINDS)}."]
    board = {field: data.pop(field, None) for field in BOARD_FIELDS}
    board_job, board_sweep, board_errors = board_sources(
        request.user, board, needs_board=kind is not None and kind.needs_board
    )
    errors.update(board_errors)
    if kind is not None and kind.needs_board and not board_errors:
        # The board reads its files where they are: on the cluster its job ran on.
        cluster = board_cluster(board_job)
        if data.get("cluster") not in (None, "", cluster):
            errors["cluster"] = [f"A board runs where the files it shows are: on {cluster}."]
        data["cluster"] = cluster
    for field, message in NOT_FOR_SESSIONS.items():
        if data.pop(field, None) not in (None, "", False):
            errors[field] = [message]
    if kind is not None and isinstance(data.get("image"), str) and not image_offers(data["image"], kind.code):
        errors["image"] = [f"This image does not ship {kind.title}; choose one that does."]
    if errors:
        raise SpecError(errors)
    data["command"] = kind.command
    data.setdefault("name", kind.code)
    # One transaction: the job goes to Slurm on commit, with its session (and token) there.
    with transaction.atomic():
        job = intake.accept(request, data)
        return InteractiveSession.objects.create(
            job=job, owner=request.user, kind=kind.code, board_job=board_job, board_sweep=board_sweep
        )


def image_offers(reference: str, app: str) -> bool:
    """Whether the catalogue's image `reference` ships `app`. A reference that is not a catalogue
    image is left to the job spec's check, which names the problem; without a catalogue the site
    vouches for its images."""
    catalogue = settings.IMAGE_CATALOGUE
    match = IMAGE_RE.fullmatch(reference)
    if catalogue is None or match is None:
        return True
    image, _why = catalogue.find(match["repository"], match["tag"], match["digest"])
    return image is None or app in image.apps


def stop(session: InteractiveSession, *, reason: str = InteractiveSession.StopReason.USER) -> None:
    """Cancel the session's job (jobs.actions.cancel); the reason, if any, is recorded first, once,
    so the pages hear it with the job's end. When Slurm refuses the cancel (CancelRefused), a
    user's stop is taken back (the session runs on, and says so); an idle stop stays recorded and
    culling cancels again at its next pass."""
    recorded = bool(reason) and InteractiveSession.objects.filter(pk=session.pk, stop_reason="").update(
        stop_reason=reason
    )
    job = Job.objects.get(pk=session.job_id)
    if job.is_final:
        return
    try:
        job_actions.cancel(job)
    except job_actions.CancelRefused:
        if recorded and reason == InteractiveSession.StopReason.USER:
            InteractiveSession.objects.filter(pk=session.pk, stop_reason=reason).update(stop_reason="")
        raise


def session_environment(job) -> dict[str, str]:
    """The server's token, in its job's submission (jobs.submission.environment), and a board's
    directories (interactive/boards.py)."""
    session = (
        InteractiveSession.objects.filter(job_id=job.pk)
        .select_related("board_job", "board_sweep")
        .only("token", "board_job", "board_sweep")
        .first()
    )
    if session is None:
        return {}
    return {"JUPYTER_TOKEN": session.token, **board_environment(session.board_job, session.board_sweep)}
