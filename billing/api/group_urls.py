"""Included from gpupool/urls.py under /api/v1/ (before the jobs API's catch-all)."""

from django.urls import path

from billing.api import group_money

urlpatterns = [
    path("groups/<int:pk>/money", group_money.GroupMoneyView.as_view(), name="api-group-money"),
    path("groups/<int:pk>/budget", group_money.GroupBudgetView.as_view(), name="api-group-budget"),
    path("groups/<int:pk>/plan", group_money.GroupPlanView.as_view(), name="api-group-plan"),
    path("groups/<int:pk>/credits", group_money.GroupCreditsView.as_view(), name="api-group-credits"),
]
