from django.urls import path

from accounts import views

app_name = "accounts"
urlpatterns = [
    path("plan/", views.plan, name="plan"),
    path("tokens/", views.api_tokens, name="api_tokens"),
    path("tokens/<int:pk>/revoke", views.revoke_api_token, name="revoke_api_token"),
]
