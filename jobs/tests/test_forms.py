from django.http import QueryDict

from jobs.forms import form_data_from_post, initial_from_spec


def test_browser_crlf_newlines_become_unix_newlines():
    post = QueryDict(mutable=True)
    post.update(
        {"command": "sleep 5\r\necho hi\r\n", "environment": "A=1\r\nB=2", "gpu_memory_gb": "", "image": " x:1 "}
    )
    data = form_data_from_post(post)
    assert data["command"] == "sleep 5\necho hi\n"
    assert data["environment"] == "A=1\nB=2"
    assert "gpu_memory_gb" not in data  # an empty field means "not given"
    assert data["image"] == "x:1"


def test_a_stored_spec_prefills_the_form():
    values = initial_from_spec({"image": "x:1", "gpu_count": 2, "environment": {"A": "1", "B": "2"}})
    assert values["environment"] == "A=1\nB=2"
    assert values["gpu_count"] == 2 and values["gpu_memory_gb"] == ""
