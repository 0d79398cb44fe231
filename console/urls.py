from django.urls import path

from console import views, views_audit, views_cluster, views_dataset_pins, views_images, views_operations

app_name = "console"
urlpatterns = [
    path("", views.home, name="home"),
    path("console/heatmap/", views_cluster.heatmap, name="heatmap"),
    path("console/heatmap.json", views_cluster.heatmap_data, name="heatmap_data"),
    path("console/nodes/", views.nodes, name="nodes"),
    path("console/nodes/<str:name>/", views_cluster.node_detail, name="node_detail"),
    path("console/nodes/<str:name>/drain", views_cluster.node_drain, name="node_drain"),
    path("console/nodes/<str:name>/resume", views_cluster.node_resume, name="node_resume"),
    path("console/nodes/<str:name>/gpus/<int:index>/", views_cluster.gpu_detail, name="gpu_detail"),
    path("console/nodes/<str:name>/gpus/<int:index>/series.json", views_cluster.gpu_series, name="gpu_series"),
    path("console/nodes/<str:name>/gpus/<int:index>/diagnose", views_cluster.gpu_diagnose, name="gpu_diagnose"),
    path("console/nodes/<str:name>/gpus/<int:index>/reset", views_cluster.gpu_reset_view, name="gpu_reset"),
    path("console/datasets/versions/<int:pk>/pins/", views_dataset_pins.version_pins, name="dataset_pins"),
    path("console/datasets/versions/<int:pk>/pin", views_dataset_pins.pin_version, name="dataset_pin"),
    path("console/datasets/versions/<int:pk>/unpin", views_dataset_pins.unpin_version, name="dataset_unpin"),
    path("console/alerts/", views_cluster.alerts, name="alerts"),
    path("console/audit/", views_audit.audit_log, name="audit"),
    path("console/telemetry/", views_cluster.telemetry_status, name="telemetry"),
    path("console/images/", views_images.images, name="images"),
    path("console/images/operations/", views_images.image_operation_start, name="image_operation_start"),
    path("console/images/operations/<int:pk>.json", views_images.image_operation_progress, name="image_operation"),
    path("console/operations/", views_operations.operations, name="operations"),
    path("console/nodes/<str:name>/power", views_operations.node_power, name="node_power"),
    path("console/groups/", views_operations.lab_view, name="lab"),
    path("console/jobs/", views.all_jobs, name="all_jobs"),
    path("marketing/signups/", views.signups, name="signups"),
]
