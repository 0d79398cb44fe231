from django.urls import path

from jobs import file_views, views
from jobs.api.views import log_download

app_name = "jobs"
urlpatterns = [
    path("", views.job_list, name="list"),
    path("new/", views.job_new, name="new"),
    path("group/<int:group_id>/", views.group_jobs, name="group"),
    path("group/<int:group_id>/<int:pk>/cancel", views.group_job_cancel, name="group_cancel"),
    path("group/<int:group_id>/<int:pk>/logs/", views.shared_logs, name="shared_logs"),
    path("status.json", views.job_status, name="status"),
    path("<int:pk>/", views.job_detail, name="detail"),
    path("<int:pk>/summary", views.job_summary, name="summary"),
    path("<int:pk>/logs.json", views.job_logs_json, name="logs_json"),
    path("<int:pk>/logs/<str:stream>/download", log_download, name="log_download"),
    path("<int:pk>/cancel", views.job_cancel, name="cancel"),
    path("<int:pk>/files/", file_views.job_files, name="files"),
    path("<int:pk>/files/archive", file_views.job_folder_archive, name="files_archive"),
    path("<int:pk>/files/view/<path:file_path>", file_views.job_file_view, name="file_view"),
    path("<int:pk>/files/raw/<path:file_path>", file_views.job_file_raw, name="file_raw"),
    path("<int:pk>/share-logs", views.share_logs, name="share_logs"),
    path("templates/<int:pk>/delete", views.template_delete, name="template_delete"),
]
