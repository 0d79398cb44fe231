from django.contrib import admin

from cluster.models import Node, SyncRun

admin.site.register(Node)
admin.site.register(SyncRun)
