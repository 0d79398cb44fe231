from django.urls import path

from accounts.api import views

urlpatterns = [
    path("plan", views.plan_view, name="api-plan"),
]
