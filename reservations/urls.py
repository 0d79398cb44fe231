from django.urls import path

from reservations import views

app_name = "reservations"
urlpatterns = [
    path("", views.reservation_list, name="list"),
    path("new/", views.reservation_new, name="new"),
    path("availability.json", views.availability_json, name="availability"),
    path("calendar/", views.calendar, name="calendar"),
    path("queue/", views.queue, name="queue"),
    path("<int:pk>/", views.reservation_detail, name="detail"),
    path("<int:pk>/cancel", views.reservation_cancel, name="cancel"),
    path("<int:pk>/approve", views.reservation_approve, name="approve"),
    path("<int:pk>/reject", views.reservation_reject, name="reject"),
]
