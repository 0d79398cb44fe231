import re

from rest_framework.exceptions import ValidationError
from rest_framework.pagination import CursorPagination


class ReservationCursorPagination(CursorPagination):
    """Keyset pagination on (start, id), latest window first, as the job list pages on
    (created_at, id). The same page_size check as jobs.api.pagination, which this layer may
    not import: the schema promises 1-200, so anything else is a 400, not another size."""

    ordering = ("-start", "-id")
    page_size = 50
    page_size_query_param = "page_size"
    max_page_size = 200

    def get_page_size(self, request):
        raw = request.query_params.get(self.page_size_query_param)
        if raw is None:
            return self.page_size
        if not re.fullmatch(r"[0-9]{1,4}", raw) or not 1 <= int(raw) <= self.max_page_size:
            raise ValidationError(
                {self.page_size_query_param: [f"a whole number from 1 to {self.max_page_size}"]},
            )
        return int(raw)

    def get_schema_operation_parameters(self, view):
        parameters = super().get_schema_operation_parameters(view)
        for parameter in parameters:
            if parameter["name"] == self.page_size_query_param:
                parameter["schema"].update({"minimum": 1, "maximum": self.max_page_size, "default": self.page_size})
        return parameters
