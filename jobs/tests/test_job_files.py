"""A job's files (jobs/files.py, jobs/api/files.py): listed folders first, downloaded whole as
they were when the download began; a link is listed and never followed, a file of another uid
never read, a path with '..' refused; another user learns nothing (404)."""

import os

import pytest

from jobs import files
from jobs.models import Job
from jobs.tests.test_logs import OWNER, _browser, _write

pytestmark = pytest.mark.django_db


@pytest.fixture
def finished(alice, job_root):  # noqa: F811  (the fixture imported above)
    directory = job_root / "u" / "j"
    _write(directory / "stdout.log", b"epoch 1 loss 0.9\n")
    _write(directory / "checkpoints" / "model-final.pt", b"\x00weights" * 1000)
    _write(directory / "metrics.csv", b"epoch,loss\n1,0.9\n2,0.5\n")
    _write(directory / "plot.png", b"\x89PNG\r\n\x1a\n" + b"\x00" * 64)
    os.chown(directory / "checkpoints", OWNER, OWNER)
    os.chown(directory, OWNER, OWNER)
    (job_root / "elsewhere").mkdir()
    (job_root / "elsewhere" / "secret.txt").write_text("another user's data")
    os.symlink(job_root / "elsewhere" / "secret.txt", directory / "escape.txt")
    os.symlink(job_root / "elsewhere", directory / "escape-dir")
    _write(directory / "planted.txt", b"hard-linked or chowned by root", uid=0)
    return Job.objects.create(
        owner=alice,
        cluster_user="u",
        slurm_job_id=9200,
        state="COMPLETED",
        standard_output="/srv/gpupool/jobs/u/j/stdout.log",
        standard_error="/srv/gpupool/jobs/u/j/stdout.log",
    )


def test_the_listing_shows_folders_first_and_links_as_links(alice, api_client_for, finished):
    body = api_client_for(alice).get(f"/api/v1/jobs/{finished.pk}/files/").json()
    assert body["path"] == "" and body["truncated"] is False
    listed = [(entry["name"], entry["kind"]) for entry in body["entries"]]
    assert listed[0] == ("checkpoints", "directory")
    assert ("escape.txt", "link") in listed and ("escape-dir", "link") in listed
    assert ("metrics.csv", "file") in listed and ("plot.png", "file") in listed
    inside = api_client_for(alice).get(f"/api/v1/jobs/{finished.pk}/files/", {"path": "checkpoints"}).json()
    assert [(entry["path"], entry["size"]) for entry in inside["entries"]] == [("checkpoints/model-final.pt", 8000)]


def test_a_file_downloads_whole_and_a_link_or_anothers_file_is_never_read(alice, api_client_for, finished):
    client = api_client_for(alice)
    response = client.get(f"/api/v1/jobs/{finished.pk}/files/checkpoints/model-final.pt")
    assert response.status_code == 200
    assert response["Content-Length"] == "8000" and "model-final.pt" in response["Content-Disposition"]
    assert b"".join(response.streaming_content) == b"\x00weights" * 1000
    for path in ("escape.txt", "escape-dir/secret.txt", "planted.txt", "checkpoints", "missing.bin"):
        refused = client.get(f"/api/v1/jobs/{finished.pk}/files/{path}")
        assert refused.status_code == 404, path
        assert b"another user's data" not in refused.content
    assert client.get(f"/api/v1/jobs/{finished.pk}/files/", {"path": "escape-dir"}).status_code == 404


@pytest.mark.parametrize("path", ["..", "../u", "checkpoints/../../elsewhere", "./metrics.csv"])
def test_a_path_that_climbs_is_refused_with_words(alice, api_client_for, finished, path):
    client = api_client_for(alice)
    listing = client.get(f"/api/v1/jobs/{finished.pk}/files/", {"path": path})
    assert listing.status_code == 400 and "'..'" in listing.json()["errors"]["path"][0]
    assert client.get(f"/api/v1/jobs/{finished.pk}/files/{path}").status_code == 400


def test_another_user_learns_nothing(bob, api_client_for, finished):
    client = api_client_for(bob)
    assert client.get(f"/api/v1/jobs/{finished.pk}/files/").status_code == 404
    assert client.get(f"/api/v1/jobs/{finished.pk}/files/metrics.csv").status_code == 404


def test_a_listing_is_bounded(alice, api_client_for, finished, job_root, monkeypatch):  # noqa: F811
    monkeypatch.setattr(files, "MAX_ENTRIES", 3)
    body = api_client_for(alice).get(f"/api/v1/jobs/{finished.pk}/files/").json()
    assert body["truncated"] is True and len(body["entries"]) == 3


def test_the_page_lists_previews_and_downloads(alice, bob, finished):
    browser = _browser(alice)
    page = browser.get(f"/jobs/{finished.pk}/files/").content.decode()
    assert "checkpoints" in page and "metrics.csv" in page and "escape.txt" in page
    preview = browser.get(f"/jobs/{finished.pk}/files/view/metrics.csv").content.decode()
    assert "1,0.9" in preview
    image = browser.get(f"/jobs/{finished.pk}/files/view/plot.png").content.decode()
    assert f"/jobs/{finished.pk}/files/raw/plot.png" in image
    raw = browser.get(f"/jobs/{finished.pk}/files/raw/plot.png")
    assert raw["Content-Type"] == "image/png" and raw["X-Content-Type-Options"] == "nosniff"
    assert _browser(bob).get(f"/jobs/{finished.pk}/files/").status_code == 404


def _zip_members(response) -> dict[str, bytes]:
    import io
    import zipfile

    archive = zipfile.ZipFile(io.BytesIO(b"".join(response.streaming_content)))
    assert archive.testzip() is None  # every member's CRC holds
    return {name: archive.read(name) for name in archive.namelist()}


def test_a_folder_downloads_as_a_zip_of_the_users_own_files_only(alice, bob, api_client_for, finished, monkeypatch):
    client = api_client_for(alice)
    whole = client.get(f"/api/v1/jobs/{finished.pk}/archive")
    assert whole.status_code == 200 and whole["Content-Type"] == "application/zip"
    assert "job-9200.zip" in whole["Content-Disposition"]
    members = _zip_members(whole)
    assert sorted(members) == ["checkpoints/model-final.pt", "metrics.csv", "plot.png", "stdout.log"]
    assert members["checkpoints/model-final.pt"] == b"\x00weights" * 1000  # no link, no file of another uid
    folder = client.get(f"/api/v1/jobs/{finished.pk}/archive", {"path": "checkpoints"})
    assert (
        list(_zip_members(folder)) == ["model-final.pt"] and "job-9200-checkpoints.zip" in folder["Content-Disposition"]
    )
    assert client.get(f"/api/v1/jobs/{finished.pk}/archive", {"path": "escape-dir"}).status_code == 404
    assert client.get(f"/api/v1/jobs/{finished.pk}/archive", {"path": "../u"}).status_code == 400
    assert api_client_for(bob).get(f"/api/v1/jobs/{finished.pk}/archive").status_code == 404
    # A folder of very many files: the first ones, and a note that says so.
    monkeypatch.setattr(files, "MAX_ARCHIVE_FILES", 2)
    capped = _zip_members(client.get(f"/api/v1/jobs/{finished.pk}/archive"))
    assert len(capped) == 3 and b"first 2 files" in capped["NOT-ALL-FILES.txt"]
    page = _browser(alice).get(f"/jobs/{finished.pk}/files/archive", {"path": "checkpoints"})
    assert list(_zip_members(page)) == ["model-final.pt"]
