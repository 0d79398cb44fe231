import pytest

from foundation.words import counted

pytestmark = pytest.mark.pure


def test_a_count_takes_the_noun_it_needs():
    assert counted(1, "task") == "1 task"
    assert counted(0, "task") == "0 tasks"
    assert counted(2500, "job") == "2,500 jobs"
    assert counted(2, "copy", "copies") == "2 copies"
