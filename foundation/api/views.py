"""One base for API views whose actions refuse with the app's own errors: a view names the
errors (`refusals`) and how one reads as an answer (`refuse`); its methods call the action
and answer, without a try/except in each (DRF hands every exception of a method to
`handle_exception`). Anything else goes on to DRF's handling (foundation.api.exceptions)."""

from __future__ import annotations

from rest_framework.response import Response
from rest_framework.views import APIView


class Refusals:
    """Mixed into an APIView or a ViewSet (before it, so its handle_exception comes first)."""

    refusals: tuple[type[Exception], ...] = ()

    def refuse(self, exc: Exception) -> Response:
        raise NotImplementedError(f"{type(self).__name__} names refusals but no refuse()")

    def handle_exception(self, exc):
        if self.refusals and isinstance(exc, self.refusals):
            return self.refuse(exc)
        return super().handle_exception(exc)


class RefusingAPIView(Refusals, APIView):
    pass
