from django.urls import path

from groups import views

app_name = "groups"
urlpatterns = [
    path("", views.group_list, name="list"),
    path("<int:pk>/", views.group_detail, name="detail"),
    path("<int:pk>/invite", views.invite, name="invite"),
    path("<int:pk>/invitations/<int:invitation_id>/revoke", views.revoke, name="revoke"),
    path("<int:pk>/members/<int:user_id>/remove", views.remove, name="remove"),
    path("<int:pk>/members/<int:user_id>/role", views.change_role, name="role"),
    path("<int:pk>/default", views.make_default, name="default"),
    path("<int:pk>/shares", views.set_shares, name="shares"),
    path("<int:pk>/close", views.close, name="close"),
    path("<int:pk>/allocations/request", views.request_allocation, name="request_allocation"),
    path("invitations/<str:token>/", views.invitation, name="invitation"),
    path("allocations/", views.allocation_queue, name="allocation_queue"),
]
