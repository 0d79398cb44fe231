"""Content negotiation that refuses an empty `format` query parameter: DRF reads `?format=` as
no format given, where the schema lists the formats there are (an empty one is not among them)."""

from rest_framework.exceptions import ValidationError
from rest_framework.negotiation import DefaultContentNegotiation


class StrictFormatNegotiation(DefaultContentNegotiation):
    def select_renderer(self, request, renderers, format_suffix=None):
        if request.query_params.get(self.settings.URL_FORMAT_OVERRIDE) == "":
            names = ", ".join(renderer.format for renderer in renderers)
            raise ValidationError({"format": [f"One of: {names}."]})
        return super().select_renderer(request, renderers, format_suffix)
