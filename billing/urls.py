from django.urls import path

from billing import views_usage

# Included from gpupool/urls.py under /billing/. Pages of other billing features append here.
app_name = "billing"
urlpatterns = [
    path("usage/", views_usage.usage, name="usage"),
    path("budget/", views_usage.budget, name="budget"),
]
