from django.urls import path

from sweeps import api

urlpatterns = [
    path("sweeps/", api.SweepListView.as_view(), name="api-sweeps"),
    path("sweeps/<int:pk>", api.SweepDetailView.as_view(), name="api-sweep"),
    path("sweeps/<int:pk>/tasks", api.SweepTasksView.as_view(), name="api-sweep-tasks"),
    path("sweeps/<int:pk>/throttle", api.SweepThrottleView.as_view(), name="api-sweep-throttle"),
    path("sweeps/<int:pk>/rerun", api.SweepRerunView.as_view(), name="api-sweep-rerun"),
    path("sweeps/<int:pk>/cancel", api.SweepCancelView.as_view(), name="api-sweep-cancel"),
    path("sweeps/<int:pk>/clone", api.SweepCloneView.as_view(), name="api-sweep-clone"),
]
