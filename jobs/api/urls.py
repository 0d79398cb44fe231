from django.urls import path, re_path
from rest_framework.routers import SimpleRouter

from jobs.api import export, views


class OptionalSlashRouter(SimpleRouter):
    """The API documents /jobs/{id}/logs without a slash and /jobs/ with one; accept both."""

    def __init__(self):
        super().__init__()
        self.trailing_slash = "/?"


router = OptionalSlashRouter()
router.register("jobs", views.JobViewSet, basename="api-jobs")

urlpatterns = [
    path("jobs/submit", views.JobSubmitViewSet.as_view({"post": "create"}), name="api-jobs-submit"),
    path("jobs/export", export.export, name="api-jobs-export"),
    path("resources/usage", views.resource_usage, name="api-resource-usage"),
    path("images/", views.images, name="api-images"),
    *router.urls,
    # Last: every other path under /api/v1/ answers as the API does (JSON), not with a page.
    re_path(r"", views.not_found),
]
