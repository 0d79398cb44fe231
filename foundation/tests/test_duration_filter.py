"""`|duration`: lengths of time in words, never Python's "2 days, 0:00:00"."""

from datetime import timedelta

import pytest

from foundation.templatetags.units import duration

pytestmark = pytest.mark.pure


@pytest.mark.parametrize(
    ("span", "words"),
    [
        (timedelta(minutes=120), "2 hours"),
        (timedelta(hours=48), "2 days"),
        (timedelta(days=90), "90 days"),
        (timedelta(hours=30), "1 day 6 hours"),
        (90, "1 minute 30 seconds"),
        (1, "1 second"),
        (0, "0 seconds"),
        ("not a number", ""),
        (None, ""),
    ],
)
def test_a_length_of_time_reads_as_words(span, words):
    assert duration(span) == words
    assert ":" not in duration(span)
