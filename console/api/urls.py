from django.urls import path

from console.api.maintenance import WindowsView, WindowView

urlpatterns = [
    path("maintenance/", WindowsView.as_view(), name="api-maintenance"),
    path("maintenance/<int:pk>/", WindowView.as_view(), name="api-maintenance-window"),
]
