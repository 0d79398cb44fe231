"""Included from gpupool/urls.py under /api/v1/, before the jobs API's catch-all 404."""

from django.urls import path

from credits.api.views import CampaignViewSet, CreditViewSet

urlpatterns = [
    path("credits/", CreditViewSet.as_view({"get": "list"}), name="api-credits"),
    path("campaigns/", CampaignViewSet.as_view({"get": "list", "post": "create"}), name="api-campaigns"),
    path("campaigns/<int:pk>/approve", CampaignViewSet.as_view({"post": "approve"}), name="api-campaign-approve"),
]
