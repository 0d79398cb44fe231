from django.urls import path

from credits import views

app_name = "credits"
urlpatterns = [
    path("credits/", views.credits_page, name="credits"),
    path("r/<slug:code>", views.landing, name="landing"),
]
