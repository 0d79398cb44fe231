"""Every refusal of the API has one shape (foundation.api.errors.ErrorSerializer):
{"detail": "...", "errors": {"field": ["message", ...]}}, `errors` only for bad input."""

from rest_framework.views import exception_handler


def api_exception_handler(exc, context):
    response = exception_handler(exc, context)
    if response is None:
        return None
    data = response.data
    if isinstance(data, dict) and "detail" in data:
        return response
    if isinstance(data, dict):
        field_errors = {str(name): _messages(value) for name, value in data.items()}
    else:
        field_errors = {"non_field_errors": _messages(data)}
    response.data = {"detail": "Invalid input.", "errors": field_errors}
    return response


def _messages(value) -> list[str]:
    if isinstance(value, list | tuple):
        return [str(item) for item in value]
    return [str(value)]
