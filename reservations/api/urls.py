"""Included from gpupool/urls.py under /api/v1/reservations/, before the jobs API's catch-all
404 (which answers any other path here).

Written out rather than routed, so the schema shows the actions as the README does
(/api/v1/reservations/{id}/cancel) without a postprocessing hook; the same paths with a
trailing slash (and a reservation without one) are accepted too, as the job API's router
accepts both, and kept out of the schema (schema=None)."""

from django.urls import path

from reservations.api.views import ReservationViewSet

ACTIONS = ("cancel", "approve", "reject")

urlpatterns = [
    path("", ReservationViewSet.as_view({"get": "list", "post": "create"}), name="api-reservations"),
    path("<int:pk>/", ReservationViewSet.as_view({"get": "retrieve"}), name="api-reservation"),
    path("<int:pk>", ReservationViewSet.as_view({"get": "retrieve"}, schema=None)),
]
for name in ACTIONS:
    urlpatterns += [
        path(f"<int:pk>/{name}", ReservationViewSet.as_view({"post": name}), name=f"api-reservation-{name}"),
        path(f"<int:pk>/{name}/", ReservationViewSet.as_view({"post": name}, schema=None)),
    ]
