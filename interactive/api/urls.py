from interactive.api.views import SessionViewSet
from jobs.api.urls import OptionalSlashRouter

router = OptionalSlashRouter()
router.register("sessions", SessionViewSet, basename="api-sessions")

urlpatterns = router.urls
