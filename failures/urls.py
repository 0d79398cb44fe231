from django.urls import path

from failures import views

app_name = "failures"
urlpatterns = [
    path("console/failures/", views.failure_groups, name="groups"),
    path("console/failures/groups/<str:signature>/", views.failure_group, name="group"),
    path("console/failures/rules/", views.rules, name="rules"),
    path("console/failures/rules/new", views.rule_write, name="rule_new"),
    path("console/failures/rules/export.json", views.rules_export, name="rules_export"),
    path("console/failures/rules/<int:pk>/", views.rule_detail, name="rule"),
    path("console/failures/rules/<int:pk>/write", views.rule_write, name="rule_write"),
    path("console/failures/rules/<int:pk>/enable", views.rule_enable, name="rule_enable"),
    path("jobs/<int:pk>/diagnosis/mark", views.mark_diagnosis, name="mark"),
]
