"""The one module that talks HTTP to slurmrestd.

Every response's `errors` list is read, because slurmrestd's status codes lie: a bad
token is 511 (or 500, or 200 with an empty list, depending on the endpoint), a refused
single-job cancel is 200. Failures are raised as the `cluster.errors` class that tells
the caller whether to retry.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import requests

from cluster.commands.reservation_request import GpuReservationRequest
from cluster.errors import (
    SlurmAuthError,
    SlurmError,
    SlurmNotFound,
    SlurmPermissionDenied,
    SlurmRequestError,
    SlurmTransientError,
)
from cluster.records.array_ids import compress_ids
from cluster.records.types import (
    TERMINAL_JOB_STATES,
    AccountingRecord,
    Job,
    JobStateEntry,
    JobSubmission,
    Node,
    Partition,
    Reservation,
)
from cluster.slurmrest.base import ApiAdapter, Json, ServedApi, parse_openapi
from cluster.slurmrest.tokens import TokenMinter

log = logging.getLogger(__name__)

# slurm_errno.h numbers that say "try again", not "you asked for something wrong".
_TRANSIENT_ERRORS = {
    1000,  # SLURM_UNEXPECTED_MSG_ERROR
    1001,  # SLURM_COMMUNICATIONS_CONNECTION_ERROR
    1002,  # SLURM_COMMUNICATIONS_SEND_ERROR
    1003,  # SLURM_COMMUNICATIONS_RECEIVE_ERROR
    1004,  # SLURM_COMMUNICATIONS_SHUTDOWN_ERROR
    2007,  # ESLURM_ERROR_ON_DESC_TO_RECORD_COPY: job table full, retry later
    5004,  # SLURM_PROTOCOL_SOCKET_IMPL_TIMEOUT
    11,  # EAGAIN
}
_AUTH_ERRORS = {
    1007,  # SLURM_PROTOCOL_AUTHENTICATION_ERROR
    2010,  # ESLURM_USER_ID_MISSING
}
_ACCESS_DENIED = 2002  # ESLURM_ACCESS_DENIED
_INVALID_JOB_ID = 2017  # ESLURM_INVALID_JOB_ID
_ALREADY_DONE = 2021  # ESLURM_ALREADY_DONE: the job ended before the cancel reached it
_STATE_FILTERED = 2172  # a cancel's job_state filter passed this job over
_INVALID_RESERVATION = 2053  # ESLURM_RESERVATION_INVALID
_AUTH_STATUSES = {401, 403, 511}
# slurmrestd's plain-text 404 for a path it does not serve, a version it dropped included: 24.11
# says "Unable find requested URL. Please view /openapi/v3 ...", 26.05 "Unable to find requested URL
# endpoint. Please query the '/openapi/v3' endpoint ...".
_ENDPOINT_MISSING = ("Unable find requested URL", "Unable to find requested URL endpoint")


class SlurmRestClient:
    def __init__(
        self,
        base_url: str,
        adapter: ApiAdapter | Callable[[], ApiAdapter],
        minter: TokenMinter,
        *,
        user_name: str,
        timeout: float = 10.0,
        session: requests.Session | None = None,
        on_endpoint_missing: Callable[[], None] | None = None,
    ):
        self.base_url = base_url.rstrip("/")
        # Told when the daemon says it has no such endpoint: it no longer serves the API version
        # settled on (upgraded under the portal), so the versions it serves are read again.
        self.on_endpoint_missing = on_endpoint_missing
        # An adapter, or a function that picks one on first use (version detection asks the
        # daemon, so building a client never fails; its first call does, as any call may).
        self._adapter = adapter
        self.minter = minter
        self.user_name = user_name
        self.timeout = timeout
        self._session = session or requests.Session()

    @property
    def adapter(self) -> ApiAdapter:
        if not isinstance(self._adapter, ApiAdapter):
            self._adapter = self._adapter()
        return self._adapter

    def as_user(self, user_name: str) -> SlurmRestClient:
        """The same daemon, acting as another Slurm user (a job submitted so runs as them)."""
        return SlurmRestClient(
            self.base_url,
            self._adapter,
            self.minter,
            user_name=user_name,
            timeout=self.timeout,
            session=self._session,
            on_endpoint_missing=self.on_endpoint_missing,
        )

    # --- transport ---------------------------------------------------------------------
    def _request(self, method: str, path: str, *, body: Json | None = None, params: dict | None = None) -> Json:
        headers = {
            "X-SLURM-USER-NAME": self.user_name,
            "X-SLURM-USER-TOKEN": self.minter.token_for(self.user_name),
        }
        url = self.base_url + path
        try:
            response = self._session.request(
                method, url, json=body, params=params, headers=headers, timeout=self.timeout
            )
        except requests.Timeout as exc:
            raise SlurmTransientError(f"slurmrestd did not answer within {self.timeout}s ({method} {path})") from exc
        except requests.ConnectionError as exc:
            raise SlurmTransientError(f"cannot reach slurmrestd at {self.base_url}: {exc}") from exc
        try:
            payload = response.json()
        except ValueError:
            payload = None
        if response.status_code == 404 and payload is None and any(t in response.text for t in _ENDPOINT_MISSING):
            # Not a missing job: the path's version is gone. A transient error (nothing is
            # settled as missing), and the next client speaks a version the daemon serves.
            if self.on_endpoint_missing is not None:
                self.on_endpoint_missing()
            raise SlurmTransientError(
                f"slurmrestd at {self.base_url} no longer serves {path.split('/')[2]} ({method} {path}): "
                "upgraded? The versions it serves are read again.",
                status=404,
            )
        _raise_for_response(response.status_code, payload, f"{method} {path}", response.text[:300])
        return payload

    def raw(self, method: str, path: str, *, body: Json | None = None) -> tuple[int, Any]:
        """Status and JSON body without interpretation: for recapturing test payloads only."""
        headers = {
            "X-SLURM-USER-NAME": self.user_name,
            "X-SLURM-USER-TOKEN": self.minter.token_for(self.user_name),
        }
        response = self._session.request(method, self.base_url + path, json=body, headers=headers, timeout=self.timeout)
        try:
            return response.status_code, response.json()
        except ValueError:
            return response.status_code, response.text

    # --- jobs --------------------------------------------------------------------------
    def list_job_states(self) -> list[JobStateEntry]:
        return self.adapter.decode_job_states(self._request("GET", self.adapter.slurm_path("jobs/state/")))

    def list_jobs(self) -> list[Job]:
        return self.adapter.decode_jobs(self._request("GET", self.adapter.slurm_path("jobs/")))

    def get_job(self, job_id: int) -> Job:
        jobs = self.adapter.decode_jobs(self._request("GET", self.adapter.slurm_path(f"job/{int(job_id)}")))
        if not jobs:
            raise SlurmNotFound(f"job {job_id} is not known to slurmctld", error_number=_INVALID_JOB_ID)
        return jobs[0]

    def ended_job_nodes(self, job: Job) -> str:
        """Where `job` (as slurmctld last reported it) ran, once it has ended.

        slurmctld reports a job that has just run to its end without its nodes for a moment
        (seen on 24.11 for COMPLETED and FAILED jobs, and on 26.05 for a job whose run took a
        few seconds), then with them again; a cancelled job may keep none. slurmdbd recorded
        the nodes when the run started, so its record answers for both generations. "" for a
        job that never ran, or that slurmdbd has not heard of yet."""
        if job.nodes or not job.is_terminal or job.start_time is None:
            return job.nodes
        path = self.adapter.slurmdb_path(f"job/{int(job.job_id)}")
        try:
            runs = [run for run in self.adapter.decode_accounting(self._request("GET", path)) if run.ran_on]
        except SlurmNotFound:
            return ""
        # A requeued job has a record per run: the one that started when this run did.
        this_run = [run for run in runs if run.start_time == job.start_time]
        return (this_run or runs)[-1].ran_on if runs else ""

    def find_job_by_comment(self, comment: str) -> Job | None:
        """This client's user's job that slurmctld still holds with this exact comment, if
        any (another user could copy a comment). Reads the full job list (seconds at
        thousands of jobs): only for the rare retry after a lost answer."""
        for job in self.list_jobs():
            if job.comment == comment and job.user_name == self.user_name:
                return job
        return None

    def submit_job(self, submission: JobSubmission) -> int:
        payload = self._request(
            "POST", self.adapter.slurm_path("job/submit"), body=self.adapter.encode_submission(submission)
        )
        return self.adapter.decode_submitted_job_id(payload)

    def cancel_job(self, job_id: int) -> None:
        """Cancel one job, raising SlurmPermissionDenied when Slurm refuses.

        The single-job DELETE answers 200 with no error even when it refused (another
        user's job) or found no job, so we use the bulk endpoint, which reports refusals,
        and then read the job back to be sure.
        """
        payload = self._request("DELETE", self.adapter.slurm_path("jobs/"), body={"jobs": [str(int(job_id))]})
        for code, words in self.adapter.decode_cancel_refusals(payload):
            if code == _ACCESS_DENIED:
                raise SlurmPermissionDenied(f"Slurm refused to cancel job {job_id}: {words}", error_number=code)
            if code == _INVALID_JOB_ID:
                raise SlurmNotFound(f"job {job_id} does not exist", error_number=code)
            if code != _ALREADY_DONE:
                raise SlurmRequestError(f"Slurm could not cancel job {job_id}: {words}", error_number=code)
        job = self.get_job(job_id)
        if job.state not in TERMINAL_JOB_STATES and "CANCELLED" not in job.states and "COMPLETING" not in job.states:
            raise SlurmPermissionDenied(f"job {job_id} is still {job.state} after the cancel request")

    # --- job arrays -------------------------------------------------------------------------
    def get_array_jobs(self, array_job_id: int) -> list[Job]:
        """Every record slurmctld holds of an array: one per task that has its own (running,
        ended) and one for the tasks still pending together (`array_task_string`). One request
        for the whole array (`GET /job/<array id>` answers them all)."""
        jobs = self.adapter.decode_jobs(self._request("GET", self.adapter.slurm_path(f"job/{int(array_job_id)}")))
        return [job for job in jobs if job.array_job_id == array_job_id]

    def cancel_array(self, array_job_id: int, *, task_ids: Sequence[int] = (), pending_only: bool = False) -> None:
        """Cancel an array's tasks: all of them, `task_ids` only, or those still pending
        (Slurm's state filter: the running ones answer 2172 and run on). Raises
        SlurmPermissionDenied when Slurm refuses."""
        if task_ids:
            jobs = [f"{int(array_job_id)}_[{compress_ids(task_ids)}]"]
        else:
            jobs = [str(int(array_job_id))]
        body: dict = {"jobs": jobs}
        if pending_only:
            body["job_state"] = ["PENDING"]
        payload = self._request("DELETE", self.adapter.slurm_path("jobs/"), body=body)
        for code, words in self.adapter.decode_cancel_refusals(payload):
            if code == _ACCESS_DENIED:
                raise SlurmPermissionDenied(f"Slurm refused to cancel array {array_job_id}: {words}", error_number=code)
            if code not in (_ALREADY_DONE, _STATE_FILTERED, _INVALID_JOB_ID):
                raise SlurmRequestError(f"Slurm could not cancel array {array_job_id}: {words}", error_number=code)

    def get_array_accounting(self, array_job_id: int) -> list[AccountingRecord]:
        """slurmdbd's records of an array's tasks (`array_task_ids` says which each covers)."""
        records = self.adapter.decode_accounting(
            self._request("GET", self.adapter.slurmdb_path(f"job/{int(array_job_id)}"))
        )
        return [record for record in records if record.array_job_id == array_job_id]

    # --- nodes, partitions, reservations ------------------------------------------------
    def list_nodes(self) -> list[Node]:
        return self.adapter.decode_nodes(self._request("GET", self.adapter.slurm_path("nodes/")))

    def list_partitions(self) -> list[Partition]:
        return self.adapter.decode_partitions(self._request("GET", self.adapter.slurm_path("partitions/")))

    def list_reservations(self) -> list[Reservation]:
        return self.adapter.decode_reservations(self._request("GET", self.adapter.slurm_path("reservations/")))

    def create_gpu_reservation(self, request: GpuReservationRequest) -> None:
        """v0.0.43+ only (`adapter.reservation_writes`), and only as the SlurmUser: a user's
        token is refused (422 / 2010). `request.start` is a moment, not NOW."""
        body = self.adapter.encode_gpu_reservation(request)
        self._request("POST", self.adapter.slurm_path("reservation"), body=body)

    def delete_reservation(self, name: str) -> None:
        """Raises SlurmNotFound for a reservation Slurm does not hold (422 / 2053)."""
        try:
            self._request("DELETE", self.adapter.slurm_path(f"reservation/{name}"))
        except SlurmRequestError as exc:
            if exc.error_number == _INVALID_RESERVATION and not isinstance(exc, SlurmNotFound):
                raise SlurmNotFound(exc.message, error_number=exc.error_number, status=exc.status) from exc
            raise

    # --- accounting (slurmdbd) ----------------------------------------------------------
    def get_accounting(self, job_id: int) -> AccountingRecord:
        records = self.adapter.decode_accounting(self._request("GET", self.adapter.slurmdb_path(f"job/{int(job_id)}")))
        if not records:
            raise SlurmNotFound(f"job {job_id} is not in accounting (yet)")
        return records[0]

    def list_accounting(self, start: datetime, end: datetime) -> list[AccountingRecord]:
        """Every accounting record (one per run: a requeued job has several) that overlaps
        [start, end], all users' when the client acts as the service user.

        slurmrestd 24.11 takes `start_time`/`end_time` only as zone-less ISO 8601 with whole
        seconds ("2026-11-29T20:51:00"), read in the daemon's own time zone: an offset, a
        "Z" or a fraction is refused with error 9202 "Parsing of ... for timestamp failed",
        as is an epoch number. The times are sent in UTC (a naive `datetime` is taken as UTC),
        so slurmrestd must run in UTC, as the dev cluster does; the window is widened to
        whole seconds.
        """

        def wire(moment: datetime, *, ceil: bool) -> str:
            moment = moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)
            if ceil and moment.microsecond:
                moment += timedelta(seconds=1)
            return moment.replace(tzinfo=None, microsecond=0).isoformat()

        params = {"start_time": wire(start, ceil=False), "end_time": wire(end, ceil=True)}
        return self.adapter.decode_accounting(self._request("GET", self.adapter.slurmdb_path("jobs/"), params=params))

    def ping(self) -> bool:
        """Whether slurmctld answers slurmrestd. Reachability only: ping answers 200 even for a
        bad token, so never use it to test auth."""
        return self.adapter.decode_controller_responding(self._request("GET", self.adapter.slurm_path("ping/")))

    def check_access(self) -> list[Node]:
        """An authenticated read (nodes): fails with SlurmAuthError on a rejected token."""
        return self.list_nodes()


def discover(base_url: str, minter: TokenMinter, *, user_name: str, timeout: float = 10.0, session=None) -> ServedApi:
    """The release and data_parser versions the daemon at `base_url` serves (`GET /openapi/v3`,
    ~1.6 MB: read once per process, see cluster.clusters.services)."""
    headers = {"X-SLURM-USER-NAME": user_name, "X-SLURM-USER-TOKEN": minter.token_for(user_name)}
    what = "GET /openapi/v3"
    try:
        response = (session or requests).get(base_url.rstrip("/") + "/openapi/v3", headers=headers, timeout=timeout)
    except requests.Timeout as exc:
        raise SlurmTransientError(f"slurmrestd did not answer within {timeout}s ({what})") from exc
    except requests.ConnectionError as exc:
        raise SlurmTransientError(f"cannot reach slurmrestd at {base_url}: {exc}") from exc
    try:
        payload = response.json()
    except ValueError:
        payload = None
    _raise_for_response(response.status_code, payload, what, response.text[:300])
    return parse_openapi(payload)


def _raise_for_response(status: int, payload: Any, what: str, text: str) -> None:
    errors = payload.get("errors", []) if isinstance(payload, dict) else []
    if errors:
        first = errors[0]
        number = int(first.get("error_number", 0) or 0)
        # `error` is Slurm's text for the number ("Requested node configuration is not
        # available"); `description` is the daemon's context ("Batch job submission failed").
        texts = [text for text in (first.get("error"), first.get("description")) if text]
        message = ": ".join(dict.fromkeys(texts)) or "unknown Slurm error"
        detail = f"{message} (Slurm error {number}, {what})"
        if number in _AUTH_ERRORS or status in _AUTH_STATUSES:
            raise SlurmAuthError(detail, error_number=number, status=status)
        if number in _TRANSIENT_ERRORS:
            raise SlurmTransientError(detail, error_number=number, status=status)
        # Slurm's own words are about the user's request and safe to show; `what` (the
        # daemon's path) is not theirs.
        public = f"{message} (Slurm error {number})"
        if number == _INVALID_JOB_ID or status == 404:
            raise SlurmNotFound(detail, error_number=number, status=status, public_message=public)
        if number == _ACCESS_DENIED:
            raise SlurmPermissionDenied(detail, error_number=number, status=status, public_message=public)
        raise SlurmRequestError(detail, error_number=number, status=status, public_message=public)
    if status in _AUTH_STATUSES:
        raise SlurmAuthError(f"slurmrestd rejected the credentials (HTTP {status}, {what})", status=status)
    if status >= 500 or payload is None and status >= 400:
        # Without a Slurm error this is the daemon or a proxy failing, not our request.
        raise SlurmTransientError(f"slurmrestd answered HTTP {status} for {what}: {text}", status=status)
    if status == 404:
        raise SlurmNotFound(f"not found: {what}", status=status)
    if status >= 400:
        raise SlurmRequestError(f"slurmrestd answered HTTP {status} for {what}: {text}", status=status)
    if not isinstance(payload, dict):
        raise SlurmError(f"slurmrestd answered {what} with a body that is not JSON: {text}", status=status)
