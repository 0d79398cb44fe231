"""Included from gpupool/urls.py under /api/v1/datasets/, before the jobs API's catch-all 404.
Written out: the tus upload URLs are the protocol's, not a router's."""

from django.urls import path

from datasets.api import views

urlpatterns = [
    path("", views.DatasetListView.as_view(), name="api-datasets"),
    path("<int:pk>/", views.DatasetDetailView.as_view(), name="api-dataset"),
    path("<int:pk>/versions/", views.VersionOpenView.as_view(), name="api-dataset-versions"),
    path("<int:pk>/versions/register", views.VersionRegisterView.as_view(), name="api-dataset-register"),
    path("<int:pk>/versions/<int:number>/", views.VersionDetailView.as_view(), name="api-dataset-version"),
    path(
        "<int:pk>/versions/<int:number>/files/<path:file_path>",
        views.VersionFileView.as_view(),
        name="api-dataset-file",
    ),
    path("<int:pk>/versions/<int:number>/commit", views.VersionCommitView.as_view(), name="api-dataset-commit"),
    path("<int:pk>/versions/<int:number>/abandon", views.VersionAbandonView.as_view(), name="api-dataset-abandon"),
    path("<int:pk>/versions/<int:number>/uploads/", views.UploadCreateView.as_view(), name="api-dataset-uploads"),
    path(
        "<int:pk>/versions/<int:number>/uploads/<uuid:upload_id>",
        views.UploadView.as_view(),
        name="api-dataset-upload",
    ),
]
