from django.contrib import admin
from django.shortcuts import redirect
from django.templatetags.static import static
from django.urls import include, path
from django.views.generic import RedirectView

from jobs.api.schema import schema_view
from telemetry import views as telemetry_views

urlpatterns = [
    # Browsers ask for /favicon.ico whatever the page says.
    path("favicon.ico", lambda request: redirect(static("favicon.svg"))),
    path("", include("console.urls")),
    path("jobs/sweeps/", include("sweeps.urls")),
    path("jobs/", include("jobs.urls")),
    path("sessions/", include("interactive.urls")),
    path("reservations/", include("reservations.urls")),
    path("groups/", include("groups.urls")),
    path("datasets/", include("datasets.urls")),
    path("billing/", include("billing.urls")),
    path("accounts/", include("allauth.urls")),
    path("settings/", include("accounts.urls")),
    path("", include("credits.urls")),
    path("", include("failures.urls")),
    # The Django admin signs in through the portal's own sign-in and its limits (accounts/adapter.py),
    # never through a form of its own with none.
    path("django-admin/login/", RedirectView.as_view(url="/accounts/login/", query_string=True)),
    path("django-admin/", admin.site.urls),
    path("api/v1/telemetry/ingest", telemetry_views.ingest, name="telemetry-ingest"),
    path("api/v1/", include("accounts.api.urls")),
    path("api/v1/", include("groups.api.urls")),
    path("api/v1/", include("billing.api.group_urls")),
    path("api/v1/billing/", include("billing.api.urls")),
    path("api/v1/reservations/", include("reservations.api.urls")),
    path("api/v1/datasets/", include("datasets.api.urls")),
    path("api/v1/", include("credits.api.urls")),
    path("api/v1/invoices/", include("billing.api.invoice_urls")),
    path("api/v1/", include("interactive.api.urls")),
    path("api/v1/", include("console.api.urls")),
    path("api/v1/", include("sweeps.api_urls")),
    # Last: jobs' URLs end with the API's own 404 for every other path under /api/v1/.
    path("api/v1/", include("jobs.api.urls")),
    path("api/schema/", schema_view, name="api-schema"),
]
