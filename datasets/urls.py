from django.urls import path

from datasets import views

app_name = "datasets"
urlpatterns = [
    path("", views.dataset_list, name="list"),
    path("over-quota/", views.over_quota_page, name="over-quota"),
    path("<int:pk>/", views.dataset_detail, name="detail"),
    path("<int:pk>/register", views.register_version, name="register"),
    path("<int:pk>/versions/<int:number>/delete", views.delete_version, name="delete-version"),
]
