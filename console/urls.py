from django.urls import path

from console import views

app_name = "console"
urlpatterns = [
    path("", views.home, name="home"),
    path("console/nodes/", views.nodes, name="nodes"),
    path("console/jobs/", views.all_jobs, name="all_jobs"),
    path("marketing/signups/", views.signups, name="signups"),
    path("vendor/plotly.min.js", views.plotly_js, name="plotly_js"),
]
