from django.urls import path

from console.views import audit, cluster, dataset_pins, efficiency, home, images, maintenance, operations

app_name = "console"
urlpatterns = [
    path("", home.home, name="home"),
    path("console/heatmap/", cluster.heatmap, name="heatmap"),
    path("console/heatmap.json", cluster.heatmap_data, name="heatmap_data"),
    path("console/nodes/", home.nodes, name="nodes"),
    path("console/nodes/<str:name>/", cluster.node_detail, name="node_detail"),
    path("console/nodes/<str:name>/drain", cluster.node_drain, name="node_drain"),
    path("console/nodes/<str:name>/resume", cluster.node_resume, name="node_resume"),
    path("console/nodes/<str:name>/gpus/<int:index>/", cluster.gpu_detail, name="gpu_detail"),
    path("console/nodes/<str:name>/gpus/<int:index>/series.json", cluster.gpu_series, name="gpu_series"),
    path("console/nodes/<str:name>/gpus/<int:index>/diagnose", cluster.gpu_diagnose, name="gpu_diagnose"),
    path("console/nodes/<str:name>/gpus/<int:index>/reset", cluster.gpu_reset_view, name="gpu_reset"),
    path("console/datasets/versions/<int:pk>/pins/", dataset_pins.version_pins, name="dataset_pins"),
    path("console/datasets/versions/<int:pk>/pin", dataset_pins.pin_version, name="dataset_pin"),
    path("console/datasets/versions/<int:pk>/unpin", dataset_pins.unpin_version, name="dataset_unpin"),
    path("console/alerts/", cluster.alerts, name="alerts"),
    path("console/efficiency/", efficiency.efficiency_board, name="efficiency"),
    path("console/efficiency.csv", efficiency.efficiency_csv, name="efficiency_csv"),
    path("console/audit/", audit.audit_log, name="audit"),
    path("console/maintenance/", maintenance.maintenance_page, name="maintenance"),
    path("console/maintenance/<int:pk>/cancel", maintenance.maintenance_cancel, name="maintenance_cancel"),
    path("console/maintenance/canary", maintenance.canary_start, name="canary_start"),
    path("console/maintenance/restart", maintenance.rolling_restart_start, name="rolling_restart_start"),
    path("console/maintenance/restart/<int:pk>/stop", maintenance.rolling_restart_stop, name="rolling_restart_stop"),
    path("console/telemetry/", cluster.telemetry_status, name="telemetry"),
    path("console/images/", images.images, name="images"),
    path("console/images/operations/", images.image_operation_start, name="image_operation_start"),
    path("console/images/operations/<int:pk>.json", images.image_operation_progress, name="image_operation"),
    path("console/operations/", operations.operations, name="operations"),
    path("console/nodes/<str:name>/power", operations.node_power, name="node_power"),
    path("console/groups/", operations.lab_view, name="lab"),
    path("console/jobs/", home.all_jobs, name="all_jobs"),
    path("marketing/signups/", home.signups, name="signups"),
]
