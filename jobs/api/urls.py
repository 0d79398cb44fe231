from django.urls import path
from rest_framework.routers import SimpleRouter

from jobs.api import views

# The API documents paths without a trailing slash (/jobs/{id}/logs); accept both.
router = SimpleRouter(trailing_slash="/?")
router.register("jobs", views.JobViewSet, basename="api-jobs")

urlpatterns = [
    path("jobs/submit", views.JobViewSet.as_view({"post": "create"}), name="api-jobs-submit"),
    path("resources/usage", views.resource_usage, name="api-resource-usage"),
    *router.urls,
]
