from django.urls import path

from interactive import views

app_name = "interactive"

urlpatterns = [
    path("", views.session_list, name="list"),
    path("new/", views.session_new, name="new"),
    path("<int:pk>/", views.session_detail, name="detail"),
    path("<int:pk>/stop", views.session_stop, name="stop"),
    path("open/<str:host_key>/", views.session_open, name="open"),
]
