from rest_framework.pagination import CursorPagination


class JobCursorPagination(CursorPagination):
    """Keyset pagination on (created_at, id): the same cost on page 1 and page 2,000,
    with 100 jobs or 100,000 (index jobs_job owner, -created_at, -id)."""

    ordering = ("-created_at", "-id")
    page_size = 50
    page_size_query_param = "page_size"
    max_page_size = 200
