from django.urls import path

from console.api.maintenance import WindowsView, WindowView
from console.api.rolling_restarts import RestartStopView, RestartsView, RestartView

urlpatterns = [
    path("maintenance/", WindowsView.as_view(), name="api-maintenance"),
    path("maintenance/<int:pk>/", WindowView.as_view(), name="api-maintenance-window"),
    path("maintenance/restarts/", RestartsView.as_view(), name="api-rolling-restarts"),
    path("maintenance/restarts/<int:pk>/", RestartView.as_view(), name="api-rolling-restart"),
    path("maintenance/restarts/<int:pk>/stop", RestartStopView.as_view(), name="api-rolling-restart-stop"),
]
