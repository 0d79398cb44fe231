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


def test_a_lists_or_a_nested_objects_errors_read_as_sentences_that_say_where():
    from rest_framework import serializers

    from foundation.api.errors import StrictBooleanField, field_messages

    class Body(serializers.Serializer):
        tasks = serializers.ListField(child=serializers.IntegerField(min_value=0))
        hold = StrictBooleanField()

    body = Body(data={"tasks": [1, None, -2], "hold": 0})
    assert not body.is_valid()
    messages = field_messages(body.errors)
    assert messages["tasks"] == [
        "item 1: This field may not be null.",
        "item 2: Ensure this value is greater than or equal to 0.",
    ]
    assert messages["hold"] == ["Must be a valid boolean."]  # 0 is not false in a JSON body
    assert field_messages(["alone"]) == {"non_field_errors": ["alone"]}
