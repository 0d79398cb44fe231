from django.urls import path

from billing import views, views_group, views_usage

# Included from gpupool/urls.py under /billing/. Pages of other billing features append here.
app_name = "billing"
urlpatterns = [
    path("usage/", views_usage.usage, name="usage"),
    path("budget/", views_usage.budget, name="budget"),
    path("invoices/", views.invoices, name="invoices"),
    path("invoices/<int:pk>/", views.invoice, name="invoice"),
    path("invoices/<int:pk>/pdf", views.invoice_pdf, name="invoice_pdf"),
    path("invoices/<int:pk>/csv", views.invoice_csv, name="invoice_csv"),
    path("groups/<int:pk>/", views_group.group_money_page, name="group_money"),
    path("groups/<int:pk>/budget", views_group.group_budget, name="group_budget"),
    path("groups/<int:pk>/plan", views_group.group_plan, name="group_plan"),
    path("groups/<int:pk>/credits", views_group.group_credits, name="group_credits"),
    path("admin/", views.admin_billing, name="admin_billing"),
    path("admin/invoices/<int:pk>/", views.admin_invoice, name="admin_invoice"),
    path("admin/invoices/<int:pk>/payment", views.admin_record_payment, name="admin_record_payment"),
    path("admin/invoices/<int:pk>/void", views.admin_void, name="admin_void"),
    path("admin/invoices/<int:pk>/issue", views.admin_issue, name="admin_issue"),
]
