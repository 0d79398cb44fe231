from django.urls import path

from credits import views, views_marketing

app_name = "credits"
urlpatterns = [
    path("credits/", views.credits_page, name="credits"),
    path("r/<slug:code>", views.landing, name="landing"),
    # Marketing's pages (marketing accounts only; 403 to anyone else).
    path("marketing/campaigns/", views_marketing.campaigns, name="marketing_campaigns"),
    path("marketing/campaigns/<int:pk>/", views_marketing.campaign_detail, name="marketing_campaign"),
    path(
        "marketing/campaigns/<int:pk>/approve",
        views_marketing.campaign_approve,
        name="marketing_campaign_approve",
    ),
    path(
        "marketing/campaigns/<int:pk>/<slug:table>.csv",
        views_marketing.campaign_detail,
        name="marketing_campaign_csv",
    ),
    path("marketing/review/", views_marketing.review_queue, name="marketing_review"),
    path("marketing/review/<int:pk>/decide", views_marketing.review_decide, name="marketing_review_decide"),
]
