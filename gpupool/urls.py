from django.contrib import admin
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView

from telemetry import views as telemetry_views

urlpatterns = [
    path("", include("console.urls")),
    path("jobs/", include("jobs.urls")),
    path("accounts/", include("allauth.urls")),
    path("settings/", include("accounts.urls")),
    path("django-admin/", admin.site.urls),
    path("api/v1/telemetry/ingest", telemetry_views.ingest, name="telemetry-ingest"),
    path("api/v1/", include("jobs.api.urls")),
    path("api/schema/", SpectacularAPIView.as_view(), name="api-schema"),
]
