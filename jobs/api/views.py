from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.db.models import Count
from django.http import Http404, HttpResponse, JsonResponse
from django.views.decorators.csrf import csrf_exempt
from drf_spectacular.utils import OpenApiExample, OpenApiParameter, extend_schema, extend_schema_view
from rest_framework import mixins, status, viewsets
from rest_framework.decorators import action, api_view
from rest_framework.exceptions import ValidationError
from rest_framework.response import Response

from foundation import file_streams
from foundation.api.errors import RETRY_AFTER
from jobs import actions
from jobs.api.clusters import CLUSTER_FILTER, cluster_filter
from jobs.api.schema import errors
from jobs.api.serializers import (
    ImageSerializer,
    JobCloneInputSerializer,
    JobSerializer,
    JobSpecInputSerializer,
    LogsSerializer,
    UsageSerializer,
    submission_json_types,
)
from jobs.api.throttles import LogReadThrottle, log_read
from jobs.drivers import drivers_by_gpu_type
from jobs.live.watching import watch
from jobs.logs import job_logs, local_log_path, open_log
from jobs.models import Job
from jobs.submission import intake
from jobs.submission.clusters import cluster_asked_by
from jobs.submission.quota import QuotaExceeded, usage_of
from jobs.submission.spec import SpecError
from plans.catalog import plan_for

INVALID_SPEC = "The job spec is invalid."

TYPE_MESSAGES = {
    bool: "must be true or false",
    str: "must be a string",
    int: "must be a whole number (a JSON number, not a string)",
    dict: "must be an object of NAME: value strings",
    list: "must be a list",
}


def json_type_errors(data) -> dict[str, list[str]]:
    """Fields of a JSON body whose type is not the schema's (null is "not given").

    jobs.submission.spec also reads the job form, whose values are all strings, so it takes "60" for
    60; over the API a number is a JSON number, as the schema says."""
    if not isinstance(data, dict):
        return {"non_field_errors": ["expected a JSON object with the job's fields"]}
    found = {}
    for name, expected in submission_json_types().items():
        value = data.get(name)
        if value is None:
            continue
        if isinstance(value, bool) != (expected is bool) or not isinstance(value, expected):
            found[name] = [TYPE_MESSAGES[expected]]
    return found


def invalid(field_errors: dict[str, list[str]]) -> Response:
    return Response({"detail": INVALID_SPEC, "errors": field_errors}, status=400)


def accepted_or_refused(accept, request, data):
    """`accept(request, data)` (a job's intake, or one built on it), and None; or None and the
    answer to why it refused: 429 rate limited, 400 the spec, 403 the quota, 409 no cluster account."""
    try:
        return accept(request, data), None
    except intake.RateLimited as exc:
        return None, Response({"detail": str(exc)}, status=429, headers={"Retry-After": str(exc.retry_after)})
    except SpecError as exc:
        return None, invalid(exc.errors)
    except QuotaExceeded as exc:
        return None, Response({"detail": str(exc)}, status=403)
    except actions.NotProvisioned as exc:
        return None, Response({"detail": str(exc)}, status=409)


def submission_response(request, data) -> Response:
    job, refusal = accepted_or_refused(intake.accept, request, data)
    if refusal is not None:
        return refusal
    serializer = JobSerializer(job)
    # Accepted this instant (SUBMITTING, or PENDING in Slurm): it has run nowhere, so there is
    # no metered cost and no running estimate to ask billing for.
    serializer.known_costs = {job.pk: None}
    return Response(serializer.data, status=status.HTTP_201_CREATED)


SUBMIT_ERRORS = errors(400, 401, 403, 409, 413, 415, 429)
SUBMIT_EXAMPLES = [
    OpenApiExample(
        "One whole GPU",
        request_only=True,
        value={
            "name": "mnist",
            "image": "nvcr.io/nvidia/pytorch:24.05-py3",
            "gpu_type": "a100",
            "gpu_count": 1,
            "command": "python train.py",
            "time_limit_minutes": 60,
        },
    ),
    OpenApiExample(
        "GPU memory (shards of one GPU)",
        request_only=True,
        value={
            "image": "nvcr.io/nvidia/pytorch:24.05-py3",
            "gpu_type": "a100",
            "gpu_memory_gb": 12,
            "command": "python eval.py",
            "time_limit_minutes": 30,
            "environment": {"BATCH_SIZE": "64"},
        },
    ),
]


@extend_schema_view(
    list=extend_schema(
        operation_id="jobs_list",
        summary="The caller's jobs, newest first",
        parameters=[CLUSTER_FILTER],
        # 400: a page_size out of range or an unknown cluster; 404: a cursor that is not one of ours.
        responses={200: JobSerializer(many=True), **errors(400, 401, 404)},
        tags=["jobs"],
    ),
    retrieve=extend_schema(
        operation_id="jobs_retrieve",
        summary="One job",
        responses={200: JobSerializer, **errors(401, 404)},
        tags=["jobs"],
    ),
)
class JobViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet):
    """The caller's own jobs. Another user's job is a 404: its existence is not theirs to learn."""

    serializer_class = JobSerializer

    def get_queryset(self):
        if getattr(self, "swagger_fake_view", False):
            # The schema generator has no user; it needs the model (for the id's type).
            return Job.objects.none()
        jobs = Job.objects.filter(owner=self.request.user)
        if self.action == "list" and (cluster := cluster_filter(self.request.query_params, jobs)):
            jobs = jobs.filter(cluster=cluster)
        # A page reads its mounts in one query of its own (JobListSerializer); one job, here.
        return jobs if self.action == "list" else jobs.prefetch_related("datasets__version")

    def list(self, request, *args, **kwargs):
        response = super().list(request, *args, **kwargs)
        # An API client polling its jobs is looking at them: keep their expected starts fresh.
        watch(row["id"] for row in response.data.get("results", []) if row.get("state") == "PENDING")
        return response

    def retrieve(self, request, *args, **kwargs):
        response = super().retrieve(request, *args, **kwargs)
        if response.data.get("state") == "PENDING":
            watch([response.data["id"]])
        return response

    @extend_schema(
        operation_id="jobs_create",
        summary="Submit a job",
        request=JobSpecInputSerializer,
        examples=SUBMIT_EXAMPLES,
        responses={201: JobSerializer, **SUBMIT_ERRORS},
        parameters=[RETRY_AFTER],
        tags=["jobs"],
    )
    def create(self, request):
        type_errors = json_type_errors(request.data)
        if type_errors:
            return invalid(type_errors)
        return submission_response(request, request.data)

    @extend_schema(
        operation_id="jobs_logs",
        summary="The tails of a job's stdout and stderr, and what the analyser recognises in them",
        responses={200: LogsSerializer, **errors(401, 404, 429)},
        parameters=[RETRY_AFTER],
        tags=["jobs"],
    )
    @action(detail=True, methods=["get"], throttle_classes=[LogReadThrottle])
    def logs(self, request, pk=None):
        job = self.get_object()
        return Response(job_logs(job, settings.LOG_TAIL_BYTES))

    @extend_schema(
        operation_id="jobs_cancel",
        summary="Cancel a job",
        request=None,
        responses={200: JobSerializer, **errors(401, 403, 404, 409)},
        tags=["jobs"],
    )
    @action(detail=True, methods=["post"])
    def cancel(self, request, pk=None):
        job = self.get_object()
        try:
            actions.cancel(job)
        except actions.CancelRefused as exc:
            return Response({"detail": str(exc)}, status=409)
        job.refresh_from_db()
        return Response(JobSerializer(job).data)

    @extend_schema(
        operation_id="jobs_clone",
        summary="Submit a copy of a job",
        request=JobCloneInputSerializer,
        examples=[OpenApiExample("A longer run", request_only=True, value={"time_limit_minutes": 120})],
        responses={201: JobSerializer, **errors(400, 401, 403, 404, 409, 413, 415, 429)},
        parameters=[RETRY_AFTER],
        tags=["jobs"],
    )
    @action(detail=True, methods=["post"])
    def clone(self, request, pk=None):
        """Submit a copy of the job; fields in the body override the original's."""
        job = self.get_object()
        type_errors = json_type_errors(request.data)
        if type_errors:
            return invalid(type_errors)
        if not job.spec:
            return Response({"detail": "This job was not submitted through the portal; it has no spec."}, status=409)
        # The cluster is not in the spec: the copy asks where the job's owner asked, unless the body says.
        asked = cluster_asked_by(job)
        data = {**({"cluster": asked} if asked else {}), **job.spec, **request.data}
        return submission_response(request, data)


class JobSubmitViewSet(JobViewSet):
    """POST /api/v1/jobs/submit: the same as POST /api/v1/jobs/, as its own operation."""

    @extend_schema(
        operation_id="jobs_submit",
        summary="Submit a job (the same as POST /api/v1/jobs/)",
        request=JobSpecInputSerializer,
        examples=SUBMIT_EXAMPLES,
        responses={201: JobSerializer, **SUBMIT_ERRORS},
        parameters=[RETRY_AFTER],
        tags=["jobs"],
    )
    def create(self, request):
        return super().create(request)


@csrf_exempt  # it changes nothing; a POST without a CSRF token gets the 404 too, not a 403 page
def not_found(request, *args, **kwargs):
    """Any other path under /api/v1/: a JSON 404 like the API's own, not Django's page."""
    return JsonResponse({"detail": "Not found."}, status=404)


@login_required
def log_download(request, pk: int, stream: str):
    job = Job.objects.filter(pk=pk, owner=request.user).first()
    if job is None or stream not in {"stdout", "stderr"}:
        raise Http404
    decision = log_read(request.user)
    if not decision.allowed:
        response = HttpResponse(
            f"Too many log reads; try again in {decision.retry_after} s.", status=429, content_type="text/plain"
        )
        response["Retry-After"] = str(decision.retry_after)
        return response
    path = local_log_path(
        job.standard_output if stream == "stdout" else job.standard_error, job.cluster_user, job.cluster
    )
    try:
        opened = open_log(path) if path is not None else None
    except OSError:
        opened = None
    if opened is None:
        raise Http404("This log does not exist (yet).")
    fd, size = opened
    name = f"job-{job.slurm_job_id or job.pk}-{stream}.log"
    return file_streams.file_response(request, fd, size, filename=name, content_type="text/plain; charset=utf-8")


@extend_schema(
    operation_id="images_list",
    summary="The images the caller's plan may use",
    description="The pool's image catalogue, filtered to the caller's plan; `framework` (exact) and `cuda` "
    "(a version prefix, e.g. 12.4) narrow it. A job's `image` must be one of these `reference`s (or its "
    "`pinned_reference`). With `gpu_type`, each image also says the oldest NVIDIA driver the nodes of that "
    "type reported (`host_driver`) and whether it is older than the image needs (`driver_too_old`).",
    parameters=[
        OpenApiParameter("framework", str, description="e.g. pytorch, tensorflow, none"),
        OpenApiParameter("cuda", str, description="CUDA version prefix, e.g. 12 or 12.4"),
        OpenApiParameter(
            "gpu_type", str, enum=list(settings.GPU_TYPES), description="Compare each image with those nodes' driver"
        ),
    ],
    responses={200: ImageSerializer(many=True), **errors(400, 401)},
    tags=["images"],
)
@api_view(["GET"])
def images(request):
    """The catalogue images of the caller's plan, optionally by framework and CUDA version."""
    framework = request.query_params.get("framework", "")
    cuda = request.query_params.get("cuda", "").rstrip(".")
    gpu_type = request.query_params.get("gpu_type")
    if gpu_type is not None and gpu_type not in settings.GPU_TYPES:
        raise ValidationError({"gpu_type": f"Unknown GPU type; one of: {', '.join(settings.GPU_TYPES)}."})
    host_driver = drivers_by_gpu_type().get(gpu_type, {}).get("oldest", "") if gpu_type else ""
    found = [
        image
        for image in settings.IMAGE_CATALOGUE.for_plan(plan_for(request.user).code)
        if (not framework or image.framework == framework)
        and (not cuda or image.cuda == cuda or image.cuda.startswith(cuda + "."))
    ]
    return Response(ImageSerializer([_image_fields(image, host_driver) for image in found], many=True).data)


def _image_fields(image, host_driver: str = "") -> dict:
    return {
        "host_driver": host_driver,
        "driver_too_old": image.driver_too_old(host_driver) if host_driver and image.min_driver else None,
        "reference": image.reference,
        "pinned_reference": image.pinned_reference,
        "title": image.title,
        "framework": image.framework,
        "framework_version": image.framework_version,
        "cuda": image.cuda,
        "python": image.python,
        "min_driver": image.min_driver,
    }


@extend_schema(
    operation_id="resources_usage",
    summary="The caller's own aggregates",
    responses={200: UsageSerializer, **errors(401)},
    tags=["resources"],
)
@api_view(["GET"])
def resource_usage(request):
    """The caller's own aggregates: GPUs held by type, GPU time this month, jobs by state.
    Nothing about nodes."""
    usage = usage_of(request.user)
    plan = plan_for(request.user)
    # One GROUP BY, however many jobs the user has.
    by_state = dict(Job.objects.filter(owner=request.user).order_by().values_list("state").annotate(jobs=Count("id")))
    return Response(
        {
            "plan": plan.code,
            "gpus_in_use_by_type": usage.active_by_type,
            "gpu_quota_by_type": plan.gpu_quota,
            "gpu_seconds_this_month": usage.gpu_seconds_this_month,
            "monthly_gpu_hours": plan.monthly_gpu_hours,
            "jobs_by_state": by_state,
        }
    )
