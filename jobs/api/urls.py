from django.urls import path
from rest_framework.routers import SimpleRouter

from jobs.api import views


class OptionalSlashRouter(SimpleRouter):
    """The API documents /jobs/{id}/logs without a slash and /jobs/ with one; accept both."""

    def __init__(self):
        super().__init__()
        self.trailing_slash = "/?"


router = OptionalSlashRouter()
router.register("jobs", views.JobViewSet, basename="api-jobs")

urlpatterns = [
    path("jobs/submit", views.JobViewSet.as_view({"post": "create"}), name="api-jobs-submit"),
    path("resources/usage", views.resource_usage, name="api-resource-usage"),
    *router.urls,
]
