from django.urls import re_path

from cluster.api.views import ClusterListView

urlpatterns = [
    # With or without the slash, as the routers' lists (jobs.api.urls.OptionalSlashRouter).
    re_path(r"^clusters/?$", ClusterListView.as_view(), name="api-clusters"),
]
