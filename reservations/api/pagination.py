from foundation.api.pagination import StrictCursorPagination


class ReservationCursorPagination(StrictCursorPagination):
    """Keyset pagination on (start, id), the latest window first."""

    ordering = ("-start", "-id")
