from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.http import FileResponse, Http404
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import mixins, status, viewsets
from rest_framework.decorators import action, api_view
from rest_framework.response import Response

from jobs import actions, intake
from jobs.api.serializers import JobSerializer, JobSpecInputSerializer, LogsSerializer
from jobs.logs import job_logs, local_log_path, open_log
from jobs.models import Job
from jobs.quota import QuotaExceeded, usage_of
from jobs.spec import SpecError


def submission_response(request, data) -> Response:
    try:
        job = intake.accept(request, data)
    except intake.RateLimited as exc:
        return Response({"detail": str(exc)}, status=429, headers={"Retry-After": str(exc.retry_after)})
    except SpecError as exc:
        return Response({"detail": "The job spec is invalid.", "errors": exc.errors}, status=400)
    except QuotaExceeded as exc:
        return Response({"detail": str(exc)}, status=403)
    except actions.NotProvisioned as exc:
        return Response({"detail": str(exc)}, status=409)
    return Response(JobSerializer(job).data, status=status.HTTP_201_CREATED)


class JobViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet):
    """The caller's own jobs. Another user's job is a 404: its existence is not theirs to learn."""

    serializer_class = JobSerializer

    def get_queryset(self):
        return Job.objects.filter(owner=self.request.user)

    @extend_schema(request=JobSpecInputSerializer, responses={201: JobSerializer, 400: None, 403: None, 429: None})
    def create(self, request):
        return submission_response(request, request.data)

    @extend_schema(responses={200: LogsSerializer})
    @action(detail=True, methods=["get"])
    def logs(self, request, pk=None):
        job = self.get_object()
        return Response(job_logs(job, settings.LOG_TAIL_BYTES))

    @extend_schema(request=None, responses={200: JobSerializer, 409: OpenApiResponse(description="refused")})
    @action(detail=True, methods=["post"])
    def cancel(self, request, pk=None):
        job = self.get_object()
        try:
            actions.cancel(job)
        except actions.CancelRefused as exc:
            return Response({"detail": str(exc)}, status=409)
        job.refresh_from_db()
        return Response(JobSerializer(job).data)

    @extend_schema(request=JobSpecInputSerializer, responses={201: JobSerializer})
    @action(detail=True, methods=["post"])
    def clone(self, request, pk=None):
        """Submit a copy of the job; fields in the body override the original's."""
        job = self.get_object()
        if not job.spec:
            return Response({"detail": "This job was not submitted through the portal; it has no spec."}, status=409)
        data = {**job.spec, **request.data}
        return submission_response(request, data)


@login_required
def log_download(request, pk: int, stream: str):
    job = Job.objects.filter(pk=pk, owner=request.user).first()
    if job is None or stream not in {"stdout", "stderr"}:
        raise Http404
    path = local_log_path(job.standard_output if stream == "stdout" else job.standard_error, job.cluster_user)
    try:
        handle = open_log(path) if path is not None else None
    except OSError:
        handle = None
    if handle is None:
        raise Http404("This log does not exist (yet).")
    return FileResponse(handle, as_attachment=True, filename=f"job-{job.slurm_job_id or job.pk}-{stream}.log")


@extend_schema(responses={200: None})
@api_view(["GET"])
def resource_usage(request):
    """The caller's own aggregates: GPUs held by type, GPU time this month, jobs by state.
    Nothing about nodes."""
    usage = usage_of(request.user)
    from billing.plans import plan_for

    plan = plan_for(request.user.profile.plan)
    by_state = {}
    for state in Job.objects.filter(owner=request.user).values_list("state", flat=True):
        by_state[state] = by_state.get(state, 0) + 1
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
