from django.urls import path, re_path
from rest_framework.routers import SimpleRouter

from jobs.api import clusters, dataset_pins, export, files, views


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
    re_path(r"^clusters/?$", clusters.ClusterListView.as_view(), name="api-clusters"),
    # Under the datasets' paths, served here: pinning submits jobs (jobs/actions.py).
    path(
        "datasets/<int:pk>/versions/<int:number>/pins/",
        dataset_pins.VersionPinsView.as_view(),
        name="api-dataset-pins",
    ),
    path(
        "datasets/<int:pk>/versions/<int:number>/pins/<str:node>",
        dataset_pins.VersionPinView.as_view(),
        name="api-dataset-pin",
    ),
    path("jobs/<int:pk>/files/", files.JobFileListView.as_view(), name="api-job-files"),
    path("jobs/<int:pk>/files/<path:file_path>", files.JobFileDownloadView.as_view(), name="api-job-file"),
    path("jobs/<int:pk>/archive", files.JobFolderArchiveView.as_view(), name="api-job-archive"),
    *router.urls,
    # Last: every other path under /api/v1/ answers as the API does (JSON), not with a page.
    re_path(r"", views.not_found),
]
