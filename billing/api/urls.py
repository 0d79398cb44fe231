from django.urls import path

from billing.api import views

# Included from gpupool/urls.py under /api/v1/billing/, before the jobs API's catch-all 404.
urlpatterns = [
    path("quote", views.billing_quote, name="api-billing-quote"),
]
