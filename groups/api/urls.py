"""Included from gpupool/urls.py under /api/v1/ (before the jobs API's catch-all)."""

from django.urls import path

from groups.api import views

urlpatterns = [
    path("groups/", views.GroupListView.as_view(), name="api-groups"),
    path("groups/<int:pk>/", views.GroupDetailView.as_view(), name="api-group"),
    path("groups/<int:pk>/members/", views.MemberListView.as_view(), name="api-group-members"),
    path("groups/<int:pk>/members/<int:user_id>/", views.MemberView.as_view(), name="api-group-member"),
    path("groups/<int:pk>/invitations/", views.InvitationListView.as_view(), name="api-group-invitations"),
    path(
        "groups/<int:pk>/invitations/<int:invitation_id>/",
        views.InvitationView.as_view(),
        name="api-group-invitation",
    ),
    path("groups/<int:pk>/allocations/", views.AllocationListView.as_view(), name="api-group-allocations"),
    path("groups/<int:pk>/usage", views.UsageView.as_view(), name="api-group-usage"),
    path("groups/invitations/accept", views.AcceptView.as_view(), name="api-group-accept"),
    path(
        "groups/allocations/<int:allocation_id>/decision",
        views.AllocationDecisionView.as_view(),
        name="api-allocation-decision",
    ),
]
