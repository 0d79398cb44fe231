from foundation.api.pagination import StrictCursorPagination


class JobCursorPagination(StrictCursorPagination):
    """Keyset pagination on (created_at, id): the same cost with 100 jobs or 100,000
    (index jobs_job owner, -created_at, -id)."""

    ordering = ("-created_at", "-id")
