"""/api/v1/sweeps/: a grid of runs of one base job (sweeps/). The caller's own only: another
user's sweep is a 404, as a job is."""

from __future__ import annotations

from django.shortcuts import get_object_or_404
from drf_spectacular.utils import OpenApiExample, OpenApiParameter, extend_schema
from rest_framework import serializers, status
from rest_framework.response import Response
from rest_framework.views import APIView

from foundation.api.errors import RETRY_AFTER, StrictBooleanField
from foundation.ratelimit import refund
from jobs import actions as job_actions
from jobs.api.schema import errors
from jobs.api.serializers import JobSpecInputSerializer
from jobs.api.views import TYPE_MESSAGES
from jobs.api.views import json_type_errors as job_json_type_errors
from jobs.costs import money
from jobs.models import Sweep
from jobs.submission import intake as job_intake
from jobs.submission.quota import QuotaExceeded
from jobs.submission.spec import SpecError, job_spec_from_dict
from sweeps import actions, intake, queries

INVALID = "The sweep is invalid."


class SweepInputSerializer(JobSpecInputSerializer):
    """A base job (every field of a job submission but keep_whole_gpu: right-sizing is for single jobs)
    plus the sweep's own fields."""

    keep_whole_gpu = None

    parameters = serializers.DictField(
        required=False,
        allow_null=True,
        help_text='Name -> values; the grid is every combination: a list ([0.1, 0.3]), {"range": [start, stop, '
        'step]} (stop included) or {"log": [start, stop, count]}. Each task gets its values as environment '
        "variables of those names; `{name}` in the command becomes `${name}`. Values: numbers, or up to 128 of "
        "A-Z a-z 0-9 . _ + - : = / , @",
    )
    points = serializers.ListField(
        child=serializers.DictField(),
        required=False,
        allow_null=True,
        help_text="Instead of parameters: the points themselves, each an object giving every parameter a value",
    )
    throttle = serializers.IntegerField(
        required=False, allow_null=True, min_value=0, help_text="Tasks running at once (0 or absent: no limit)"
    )
    metric = serializers.RegexField(
        r"^([A-Za-z_][A-Za-z0-9_.-]{0,63})?$",
        required=False,
        allow_null=True,
        help_text="A metric each task reports (metrics.json in its directory, or a line GPUPOOL_METRIC name=value)",
    )
    metric_goal = serializers.ChoiceField(choices=["min", "max"], required=False, allow_null=True)


class ThrottleSerializer(serializers.Serializer):
    throttle = serializers.IntegerField(min_value=0, help_text="Tasks running at once; 0: no limit")


class RerunSerializer(serializers.Serializer):
    tasks = serializers.ListField(
        child=serializers.IntegerField(min_value=0),
        required=False,
        allow_null=True,
        max_length=10_000,
        help_text="Sweep indexes to run again (each must have ended); absent: every failed task",
    )


class CancelSerializer(serializers.Serializer):
    pending_only = StrictBooleanField(
        required=False, default=True, help_text="true (default): only tasks not yet started; false: every task"
    )


class TaskSerializer(serializers.Serializer):
    id = serializers.IntegerField(help_text="The task's job id (GET /api/v1/jobs/{id}, its logs)")
    sweep_index = serializers.IntegerField()
    parameters = serializers.DictField()
    state = serializers.CharField()
    state_reason = serializers.CharField()
    exit_code = serializers.IntegerField(allow_null=True)
    slurm_job_id = serializers.IntegerField(allow_null=True)
    slurm_array_job_id = serializers.IntegerField(allow_null=True)
    array_task_id = serializers.IntegerField(allow_null=True)
    start_time = serializers.DateTimeField(allow_null=True)
    end_time = serializers.DateTimeField(allow_null=True)
    elapsed_seconds = serializers.IntegerField(allow_null=True)
    gpu_count = serializers.IntegerField(allow_null=True)
    metric = serializers.FloatField(allow_null=True)
    error = serializers.CharField()
    sweep_current = serializers.BooleanField(help_text="false: an earlier attempt, run again since")


class SweepQuoteSerializer(serializers.Serializer):
    tasks = serializers.IntegerField()
    gpu_seconds = serializers.IntegerField(help_text="Every task for its whole time limit")
    total = serializers.CharField(help_text="USD, exact decimal string, at the plan's prices")
    covered_gpu_seconds = serializers.IntegerField(help_text="Covered by the plan's hours left and credits now")
    payable = serializers.CharField(help_text="What the caller would pay of it")
    note = serializers.CharField()


class SweepSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    uuid = serializers.UUIDField()
    name = serializers.CharField()
    group = serializers.IntegerField(allow_null=True)
    point_count = serializers.IntegerField()
    throttle = serializers.IntegerField()
    parameters = serializers.ListField(child=serializers.CharField(), help_text="The parameters' names")
    metric = serializers.CharField()
    metric_goal = serializers.CharField()
    counts = serializers.DictField(child=serializers.IntegerField(), help_text="Current tasks by state")
    arrays = serializers.ListField(child=serializers.DictField(), help_text="Slurm arrays: id, offset, tasks, state")
    cost = serializers.CharField(
        allow_null=True, help_text="USD: what its tasks were charged, every attempt; null in the list (ask the sweep)"
    )
    cost_so_far = serializers.CharField(
        allow_null=True, help_text="USD: running tasks' estimates; null in the list (ask the sweep)"
    )
    gpu_seconds = serializers.IntegerField()
    quote = SweepQuoteSerializer(allow_null=True, help_text="The most the sweep could cost (every task its time limit)")
    best = serializers.DictField(allow_null=True, help_text="The task with the best metric")
    spec = serializers.DictField(help_text="The base job; its command is the template")
    cloned_from = serializers.IntegerField(allow_null=True)
    created_at = serializers.DateTimeField()


def _quote(sweep: Sweep) -> dict | None:
    quote = queries.quote_sweep(sweep.owner, job_spec_from_dict(sweep.spec), sweep.point_count, sweep.group)
    if quote is None:
        return None
    return {
        "tasks": quote.runs,
        "gpu_seconds": quote.gpu_seconds,
        "total": quote.total_text,
        "covered_gpu_seconds": quote.covered_gpu_seconds,
        "payable": quote.payable_text,
        "note": quote.note,
    }


def sweep_body(sweep: Sweep, *, full: bool = True) -> dict:
    cost = queries.sweep_cost(sweep) if full else None
    return {
        "id": sweep.pk,
        "uuid": sweep.uuid,
        "name": sweep.name,
        "group": sweep.group_id,
        "point_count": sweep.point_count,
        "throttle": sweep.throttle,
        "parameters": sweep.grid["names"],
        "metric": sweep.metric_name,
        "metric_goal": sweep.metric_goal,
        "counts": queries.state_counts(sweep),
        "arrays": [
            {
                "slurm_array_job_id": array.slurm_array_job_id,
                "offset": array.offset,
                "tasks": array.task_ids,
                "state": array.state,
                "error": array.error,
            }
            for array in sweep.arrays.all()
        ],
        "cost": money(cost.total) if cost else None,
        "cost_so_far": money(cost.so_far) if cost else None,
        "gpu_seconds": cost.gpu_seconds if cost else 0,
        "quote": _quote(sweep) if full else None,
        "best": queries.best_task(sweep) if full else None,
        "spec": sweep.spec,
        "cloned_from": sweep.cloned_from_id,
        "created_at": sweep.created_at,
    }


# The sweep's own fields, by their JSON type in the schema (the job's: jobs.api.views).
SWEEP_JSON_TYPES = {"parameters": dict, "points": list, "throttle": int, "metric": str, "metric_goal": str}


def json_type_errors(data) -> dict[str, list[str]]:
    """Fields whose JSON type is not the schema's (null is "not given"), as a job's are checked."""
    errors = job_json_type_errors(data)
    if not isinstance(data, dict):
        return errors
    for name, expected in SWEEP_JSON_TYPES.items():
        value = data.get(name)
        if value is not None and (isinstance(value, bool) or not isinstance(value, expected)):
            errors[name] = [TYPE_MESSAGES[expected]]
    return errors


def _refused(exc) -> Response:
    if isinstance(exc, SpecError):
        return Response({"detail": INVALID, "errors": exc.errors}, status=400)
    if isinstance(exc, job_intake.RateLimited):
        return Response({"detail": str(exc)}, status=429, headers={"Retry-After": str(exc.retry_after)})
    if isinstance(exc, QuotaExceeded):
        return Response({"detail": str(exc)}, status=403)
    if isinstance(exc, job_actions.NotProvisioned | actions.SweepRefused):
        return Response({"detail": str(exc)}, status=409)
    raise exc


def _own(request, pk) -> Sweep:
    return get_object_or_404(queries.own_sweeps(request.user), pk=pk)


class SweepListView(APIView):
    @extend_schema(
        operation_id="sweeps_list",
        summary="The caller's sweeps, newest first (at most 200)",
        responses={200: SweepSerializer(many=True), **errors(401)},
        tags=["sweeps"],
    )
    def get(self, request):
        sweeps = queries.own_sweeps(request.user).prefetch_related("arrays")[:200]
        return Response(SweepSerializer([sweep_body(sweep, full=False) for sweep in sweeps], many=True).data)

    @extend_schema(
        operation_id="sweeps_create",
        summary="Submit a sweep: a base job and its parameters, run as Slurm job arrays",
        request=SweepInputSerializer,
        examples=[
            OpenApiExample(
                "Learning rates x batch sizes",
                request_only=True,
                value={
                    "name": "lr-sweep",
                    "image": "nvcr.io/nvidia/pytorch:24.05-py3",
                    "gpu_type": "a100",
                    "gpu_count": 1,
                    "command": "python train.py --lr {lr} --batch-size {bs}",
                    "time_limit_minutes": 60,
                    "parameters": {"lr": {"log": [0.0001, 0.01, 3]}, "bs": [32, 64]},
                    "throttle": 4,
                    "metric": "val_loss",
                },
            )
        ],
        responses={201: SweepSerializer, **errors(400, 401, 403, 409, 413, 415, 429)},
        parameters=[RETRY_AFTER],
        tags=["sweeps"],
    )
    def post(self, request):
        type_errors = json_type_errors(request.data)
        if type_errors:
            return Response({"detail": INVALID, "errors": type_errors}, status=400)
        try:
            sweep = intake.accept(request, request.data)
        except Exception as exc:  # noqa: BLE001  (_refused re-raises what it does not answer)
            return _refused(exc)
        return Response(SweepSerializer(sweep_body(sweep)).data, status=status.HTTP_201_CREATED)


class SweepDetailView(APIView):
    @extend_schema(
        operation_id="sweeps_retrieve",
        summary="One sweep: counts by state, cost, quote, best task",
        responses={200: SweepSerializer, **errors(401, 404)},
        tags=["sweeps"],
    )
    def get(self, request, pk: int):
        return Response(SweepSerializer(sweep_body(_own(request, pk))).data)


class SweepTasksView(APIView):
    @extend_schema(
        operation_id="sweeps_tasks",
        summary="Every point's task: its values, state, exit code, metric",
        parameters=[
            OpenApiParameter("history", bool, description="true: earlier attempts of rerun points too"),
            OpenApiParameter("state", str, description="Only tasks in this state (e.g. FAILED)"),
            OpenApiParameter(
                "sort", str, description="index (default), metric, state, or a parameter's name; '-' first: descending"
            ),
        ],
        responses={200: TaskSerializer(many=True), **errors(400, 401, 404)},
        tags=["sweeps"],
    )
    def get(self, request, pk: int):
        sweep = _own(request, pk)
        history = request.query_params.get("history", "false")
        if history not in ("true", "false"):
            return Response({"detail": INVALID, "errors": {"history": ["true or false."]}}, status=400)
        rows = queries.task_rows(sweep, history=history == "true")
        try:
            rows = queries.select_tasks(
                sweep,
                rows,
                state=request.query_params.get("state", ""),
                sort=request.query_params.get("sort") or "index",
            )
        except queries.UnknownSort:
            return Response(
                {"detail": "Unknown sort.", "errors": {"sort": ["index, metric, state or a parameter's name"]}}, 400
            )
        return Response(TaskSerializer(rows, many=True).data)


class SweepThrottleView(APIView):
    @extend_schema(
        operation_id="sweeps_throttle",
        summary="Change how many tasks run at once, live (Slurm's ArrayTaskThrottle)",
        request=ThrottleSerializer,
        responses={200: SweepSerializer, **errors(400, 401, 404, 409, 415)},
        tags=["sweeps"],
    )
    def post(self, request, pk: int):
        sweep = _own(request, pk)
        data = ThrottleSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        try:
            sweep = actions.set_throttle(request.user, sweep, data.validated_data["throttle"])
        except actions.SweepRefused as exc:
            return Response({"detail": str(exc)}, status=409)
        return Response(SweepSerializer(sweep_body(sweep)).data)


class SweepRerunView(APIView):
    @extend_schema(
        operation_id="sweeps_rerun",
        summary="Run the failed (or the chosen) tasks again with the same values, as a new array",
        request=RerunSerializer,
        responses={200: SweepSerializer, **errors(400, 401, 403, 404, 409, 415)},
        tags=["sweeps"],
    )
    def post(self, request, pk: int):
        sweep = _own(request, pk)
        data = RerunSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        try:
            actions.rerun_tasks(request.user, sweep, data.validated_data.get("tasks"))
        except Exception as exc:  # noqa: BLE001  (_refused re-raises what it does not answer)
            return _refused(exc)
        return Response(SweepSerializer(sweep_body(sweep)).data)


class SweepCancelView(APIView):
    @extend_schema(
        operation_id="sweeps_cancel",
        summary="Cancel the pending tasks (default), or every task",
        request=CancelSerializer,
        responses={200: SweepSerializer, **errors(400, 401, 404, 409, 415)},
        tags=["sweeps"],
    )
    def post(self, request, pk: int):
        sweep = _own(request, pk)
        data = CancelSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        try:
            actions.cancel_sweep(request.user, sweep, pending_only=data.validated_data["pending_only"])
        except actions.SweepRefused as exc:
            return Response({"detail": str(exc)}, status=409)
        return Response(SweepSerializer(sweep_body(sweep)).data)


class SweepCloneView(APIView):
    @extend_schema(
        operation_id="sweeps_clone",
        summary="Submit the same sweep again (checked against today's plan)",
        request=None,
        responses={201: SweepSerializer, **errors(400, 401, 403, 404, 409, 429)},
        parameters=[RETRY_AFTER],
        tags=["sweeps"],
    )
    def post(self, request, pk: int):
        sweep = _own(request, pk)
        try:
            counted = job_intake.count_submission(request)
        except job_intake.RateLimited as exc:
            return _refused(exc)
        try:
            clone = actions.clone_sweep(request.user, sweep)
        except Exception as exc:  # noqa: BLE001  (_refused re-raises what it does not answer)
            for scope, key in counted:
                refund(scope, key)
            return _refused(exc)
        return Response(SweepSerializer(sweep_body(clone)).data, status=status.HTTP_201_CREATED)
