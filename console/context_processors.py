from django.urls import reverse
from django.utils.functional import SimpleLazyObject

from accounts.access import user_role
from accounts.models import Role
from cluster.records.queries import clusters_not_answering
from console.actions.maintenance import announced

_NAVIGATION = {
    Role.USER: [
        ("Dashboard", "console:home"),
        ("GPUs", "console:heatmap"),
        ("My jobs", "jobs:list"),
        ("New job", "jobs:new"),
        ("Sweeps", "sweeps:sweeps"),
        ("API tokens", "accounts:api_tokens"),
    ],
    Role.ADMIN: [
        ("Dashboard", "console:home"),
        ("GPUs", "console:heatmap"),
        ("Nodes", "console:nodes"),
        ("All jobs", "console:all_jobs"),
        ("Alerts", "console:alerts"),
        ("Failures", "failures:groups"),
        ("Idle GPUs", "console:efficiency"),
        ("Audit", "console:audit"),
        ("Telemetry", "console:telemetry"),
        ("Images", "console:images"),
        ("Operations", "console:operations"),
        ("Maintenance", "console:maintenance"),
        ("Lab", "console:lab"),
        ("Allocations", "groups:allocation_queue"),
        ("My jobs", "jobs:list"),
        ("New job", "jobs:new"),
        ("Sweeps", "sweeps:sweeps"),
    ],
    Role.MARKETING: [("Dashboard", "console:home"), ("Sign-ups", "console:signups")],
}


def navigation(request):
    role = user_role(request.user)
    if role is None:
        return {"nav_items": [], "nav_role": None}
    items = [
        {"label": label, "url": reverse(name), "active": request.path == reverse(name)}
        for label, name in _NAVIGATION.get(role, _NAVIGATION[Role.USER])
    ]
    context = {"nav_items": items, "nav_role": role, "maintenance": SimpleLazyObject(lambda: list(announced()))}
    if role in (Role.USER, Role.ADMIN):
        # A cluster that stopped answering: every page of its jobs and GPUs is as of its last answer.
        context["stale_clusters"] = SimpleLazyObject(clusters_not_answering)
    return context
