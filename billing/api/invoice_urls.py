"""Included from gpupool/urls.py under /api/v1/invoices/, before the jobs API's catch-all 404.
Written out (as reservations' are) so the schema shows /api/v1/invoices/{id}/pdf; the same
paths with or without the last slash are accepted and kept out of the schema."""

from django.urls import path

from billing.api.invoices import InvoiceViewSet

urlpatterns = [
    path("", InvoiceViewSet.as_view({"get": "list"}), name="api-invoices"),
    path("<int:pk>/", InvoiceViewSet.as_view({"get": "retrieve"}), name="api-invoice"),
    path("<int:pk>", InvoiceViewSet.as_view({"get": "retrieve"}, schema=None)),
]
for name in ("pdf", "csv"):
    # The action's own settings (its renderers), as a router would pass them.
    options = getattr(InvoiceViewSet, name).kwargs
    urlpatterns += [
        path(f"<int:pk>/{name}", InvoiceViewSet.as_view({"get": name}, **options), name=f"api-invoice-{name}"),
        path(f"<int:pk>/{name}/", InvoiceViewSet.as_view({"get": name}, **{**options, "schema": None})),
    ]
