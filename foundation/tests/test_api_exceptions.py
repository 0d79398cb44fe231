"""A database that does not answer is a 503 in the API's one refusal shape (foundation/api/exceptions.py)."""

from django.db import OperationalError
from rest_framework.permissions import AllowAny
from rest_framework.test import APIRequestFactory
from rest_framework.views import APIView


class DatabaseDown(APIView):
    permission_classes = [AllowAny]
    authentication_classes = []

    def get(self, request):
        raise OperationalError('connection to server at "db" failed: Connection refused')

    post = get


def test_a_read_while_the_database_restarts_says_when_to_try_again():
    response = DatabaseDown.as_view()(APIRequestFactory().get("/api/v1/jobs/"))
    assert response.status_code == 503
    assert response["Retry-After"] == "5"
    assert "try again" in response.data["detail"]


def test_a_write_is_not_invited_to_be_sent_again_blindly():
    # The database may have failed after the commit: sending the submission again could make two jobs.
    response = DatabaseDown.as_view()(APIRequestFactory().post("/api/v1/jobs/", {}, format="json"))
    assert response.status_code == 503
    assert not response.has_header("Retry-After")
    assert "may or may not have been recorded" in response.data["detail"]
