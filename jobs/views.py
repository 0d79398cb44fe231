from django.contrib.auth.decorators import login_required
from django.http import JsonResponse
from django.shortcuts import get_object_or_404, render

from jobs.events import job_payload
from jobs.models import Job


@login_required
def job_list(request):
    jobs = Job.objects.filter(owner=request.user).order_by("-created_at")[:100]
    return render(request, "jobs/list.html", {"jobs": jobs})


@login_required
def job_detail(request, pk: int):
    # Another user's job is a 404, not a 403: its existence is not theirs to learn.
    job = get_object_or_404(Job, pk=pk, owner=request.user)
    return render(request, "jobs/detail.html", {"job": job})


@login_required
def job_status(request):
    """The live page's polling fallback: the user's latest jobs, as the socket sends them."""
    jobs = Job.objects.filter(owner=request.user).order_by("-updated_at")[:100]
    return JsonResponse({"jobs": [job_payload(job) for job in jobs]})
