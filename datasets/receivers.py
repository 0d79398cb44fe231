"""Connected in DatasetsConfig.ready()."""

from datasets.tasks import verify_version


def enqueue_verification(sender, version_id: int, **kwargs) -> None:
    verify_version.delay(version_id)
