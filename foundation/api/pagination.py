"""Keyset (cursor) pagination with a page size the schema can promise: the same cost on page
1 and page 2,000, and a page_size outside 1-200 is a 400 rather than a page of another size."""

import re

from rest_framework.exceptions import ValidationError
from rest_framework.pagination import CursorPagination


class StrictCursorPagination(CursorPagination):
    page_size = 50
    page_size_query_param = "page_size"
    max_page_size = 200

    def get_page_size(self, request):
        # DRF falls back to the default on a bad value; the schema promises 1-200.
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
