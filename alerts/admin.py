from django.contrib import admin

from alerts.models import Alert, AlertRule

admin.site.register(AlertRule)
admin.site.register(Alert)
