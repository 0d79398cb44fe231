from django.urls import path

from sweeps import views

app_name = "sweeps"
urlpatterns = [
    path("", views.sweep_list, name="sweeps"),
    path("<int:pk>/", views.sweep_detail, name="sweep"),
    path("<int:pk>/cells.json", views.sweep_cells, name="sweep_cells"),
    path("<int:pk>/throttle", views.sweep_throttle, name="sweep_throttle"),
    path("<int:pk>/cancel", views.sweep_cancel, name="sweep_cancel"),
    path("<int:pk>/rerun", views.sweep_rerun, name="sweep_rerun"),
    path("<int:pk>/clone", views.sweep_clone, name="sweep_clone"),
]
