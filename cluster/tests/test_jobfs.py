"""cluster.files.jobfs: what a job can leave in its own directory (symlinks swapped in at any
moment, FIFOs, other users' files, files that keep growing) is never followed, waited on,
read or chowned. Runs as root (like the worker), so files can be given any owner."""

from __future__ import annotations

import errno
import os
import sys
import threading
import time
from pathlib import Path, PurePosixPath

import pytest

from cluster.files import jobfs
from cluster.files.paths import JobPathMap

OWNER = 4242  # the job owner's cluster uid; need not exist on this host
STRANGER = 4343


def _file(path: Path, data: bytes, uid: int = OWNER) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    os.chown(path, uid, uid)
    return path


def _read(location: jobfs.Beneath, uid: int = OWNER) -> bytes:
    fd = jobfs.open_regular_file(location, owner_uid=uid)
    try:
        return jobfs.read_at_most(fd, 0, 1 << 16)
    finally:
        os.close(fd)


@pytest.fixture
def root(tmp_path):
    (tmp_path / "jobs").mkdir()
    return tmp_path / "jobs"


def test_reads_a_regular_file_of_the_owner(root):
    _file(root / "u" / "j" / "stdout.log", b"hello\n")
    assert _read(jobfs.Beneath(root, ("u", "j", "stdout.log"))) == b"hello\n"


def test_a_file_of_another_uid_is_refused(root):
    # e.g. a hard link a job made to a file it could not read itself
    _file(root / "u" / "j" / "stdout.log", b"someone else's\n", uid=STRANGER)
    with pytest.raises(jobfs.UnsafePath):
        _read(jobfs.Beneath(root, ("u", "j", "stdout.log")))


@pytest.mark.parametrize("link_at", [1, 2, 3])
def test_a_symlink_at_any_depth_is_refused(root, tmp_path, link_at):
    parts = ("u", "j", "stdout.log")
    _file(tmp_path / "outside" / "j" / "stdout.log", b"TARGET\n")
    _file(root.joinpath(*parts), b"real\n")
    link = root.joinpath(*parts[:link_at])
    if link.is_dir():
        os.rename(link, link.with_name("parked"))
    else:
        link.unlink()
    link.symlink_to(tmp_path.joinpath("outside", *parts[1:link_at]))
    # The target is the owner's too: only the walk keeps it out, not the uid check.
    assert root.joinpath(*parts).read_bytes() == b"TARGET\n"
    with pytest.raises(jobfs.UnsafePath):
        _read(jobfs.Beneath(root, parts))


def test_a_fifo_is_refused_at_once(root):
    (root / "u" / "j").mkdir(parents=True)
    fifo = root / "u" / "j" / "stdout.log"
    os.mkfifo(fifo)
    os.chown(fifo, OWNER, OWNER)
    outcome = []
    reader = threading.Thread(target=lambda: outcome.append(_try_read(fifo, root)), daemon=True)
    started = time.monotonic()
    reader.start()
    reader.join(timeout=1)
    if reader.is_alive():
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))  # let the stuck reader go
        pytest.fail("opening a FIFO blocked")
    assert time.monotonic() - started < 1
    assert outcome == ["refused"]


def _try_read(path: Path, root: Path) -> str:
    try:
        _read(jobfs.Beneath(root, path.relative_to(root).parts))
    except jobfs.UnsafePath:
        return "refused"
    return "read"


def test_a_directory_is_not_a_file(root):
    (root / "u" / "j" / "stdout.log").mkdir(parents=True)
    os.chown(root / "u" / "j" / "stdout.log", OWNER, OWNER)
    with pytest.raises(jobfs.UnsafePath):
        _read(jobfs.Beneath(root, ("u", "j", "stdout.log")))


@pytest.mark.parametrize("parts", [(), ("",), ("..",), (".",), ("a/b",), ("a\0",), ("u", "..", "v")])
def test_components_cannot_leave_the_root(root, parts):
    with pytest.raises(ValueError):
        jobfs.Beneath(root, parts)


def test_swapping_a_directory_for_a_symlink_never_leaks_the_target(root, tmp_path):
    """A job flips its own directory between a real one and a symlink while the portal
    reads; a check on the resolved path followed by an open by name loses this race
    (tens of leaks in 3000 reads when this test was written), the walk never does."""
    _file(root / "u" / "j" / "stdout.log", b"REAL\n")
    # Owned by the job's owner too: only the walk stands between the reader and it.
    _file(tmp_path / "outside" / "stdout.log", b"TARGET\n")
    switch_interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)  # interleave the two threads often
    stop = threading.Event()
    swaps = [0]

    def swap():
        directory, parked = root / "u" / "j", root / "u" / "j.parked"
        while not stop.is_set():
            os.rename(directory, parked)
            os.symlink(tmp_path / "outside", directory)
            os.unlink(directory)
            os.rename(parked, directory)
            swaps[0] += 1

    location = jobfs.Beneath(root, ("u", "j", "stdout.log"))
    seen = {"real": 0, "refused": 0, "missing": 0}
    swapper = threading.Thread(target=swap, daemon=True)
    swapper.start()
    deadline = time.monotonic() + 60
    iterations = 0
    try:
        # Thousands of reads, and enough of each outcome that the race was really run.
        while iterations < 3000 or min(seen["real"], seen["refused"]) < 20:
            assert time.monotonic() < deadline, f"the race did not run both ways: {seen}"
            iterations += 1
            try:
                data = _read(location)
            except jobfs.UnsafePath:
                seen["refused"] += 1  # the symlink was in place
                continue
            except FileNotFoundError:
                seen["missing"] += 1  # between the swapper's renames
                continue
            assert b"TARGET" not in data, f"read the symlink's target after {iterations} reads"
            assert data == b"REAL\n"
            seen["real"] += 1
    finally:
        stop.set()
        swapper.join()
        sys.setswitchinterval(switch_interval)
    assert swaps[0] > 0


def test_a_bounded_reader_ends_where_the_file_ended_when_opened(root):
    path = _file(root / "u" / "j" / "stdout.log", b"a" * 10_000)
    fd = jobfs.open_regular_file(jobfs.Beneath(root, ("u", "j", "stdout.log")), owner_uid=OWNER)
    reader = jobfs.BoundedReader(fd, os.fstat(fd).st_size)
    with open(path, "ab") as grow:
        grow.write(b"b" * 50_000)  # the job keeps writing after the download started
    assert reader.seek(0, 2) == 10_000 and reader.seek(0) == 0
    assert reader.read() == b"a" * 10_000
    reader.close()
    with pytest.raises(OSError) as closed:
        os.fstat(fd)
    assert closed.value.errno == errno.EBADF


def test_read_at_most_reads_no_more_than_asked(root):
    path = _file(root / "big", b"x" * (3 << 20))
    fd = os.open(path, os.O_RDONLY)
    try:
        assert len(jobfs.read_at_most(fd, 100, 5000)) == 5000
        assert jobfs.read_at_most(fd, (3 << 20) - 3, 5000) == b"xxx"
    finally:
        os.close(fd)


def _owner(path: Path) -> tuple[int, int]:
    info = os.lstat(path)
    return info.st_uid, info.st_gid


def test_makes_each_directory_owned_by_the_user(root):
    jobfs.make_owned_directory(jobfs.Beneath(root, ("u", "j")), uid=OWNER, gid=OWNER + 1)
    assert _owner(root / "u") == (OWNER, OWNER + 1)
    assert _owner(root / "u" / "j") == (OWNER, OWNER + 1)
    # A retry (the task runs again) accepts what it made.
    jobfs.make_owned_directory(jobfs.Beneath(root, ("u", "j")), uid=OWNER, gid=OWNER + 1)


@pytest.mark.parametrize("planted", [("u",), ("u", "j")])
def test_a_planted_symlink_is_never_chowned_through(root, tmp_path, planted):
    victim = tmp_path / "victim"  # say, the directory holding the Slurm JWT key
    victim.mkdir(mode=0o700)
    if len(planted) == 2:
        (root / "u").mkdir()
        os.chown(root / "u", OWNER, OWNER)
    root.joinpath(*planted).symlink_to(victim)
    with pytest.raises(jobfs.UnsafePath):
        jobfs.make_owned_directory(jobfs.Beneath(root, ("u", "j")), uid=OWNER, gid=OWNER)
    assert _owner(victim) == (0, 0)
    assert not (victim / "j").exists()


def test_a_directory_of_another_user_is_refused(root):
    # Someone else's job made <root>/u before u's first job: u's logs must not go there.
    (root / "u").mkdir()
    os.chown(root / "u", STRANGER, STRANGER)
    with pytest.raises(jobfs.UnsafePath):
        jobfs.make_owned_directory(jobfs.Beneath(root, ("u", "j")), uid=OWNER, gid=OWNER)
    assert _owner(root / "u") == (STRANGER, STRANGER)
    assert not (root / "u" / "j").exists()


def test_a_directory_this_process_made_earlier_is_handed_over(root):
    (root / "u").mkdir()  # owned by root: an earlier run that did not know the uid
    jobfs.make_owned_directory(jobfs.Beneath(root, ("u", "j")), uid=OWNER, gid=OWNER)
    assert _owner(root / "u") == (OWNER, OWNER)


def test_a_file_in_place_of_a_directory_is_refused(root):
    _file(root / "u", b"")
    with pytest.raises(jobfs.UnsafePath):
        jobfs.make_owned_directory(jobfs.Beneath(root, ("u", "j")), uid=OWNER, gid=OWNER)


MAP = JobPathMap(PurePosixPath("/srv/gpupool/jobs"), Path("/var/jobs"))


def test_user_file_is_under_that_users_directory():
    location = MAP.user_file("/srv/gpupool/jobs/alice/123/stdout.log", "alice")
    assert location == jobfs.Beneath(Path("/var/jobs"), ("alice", "123", "stdout.log"))


@pytest.mark.parametrize(
    "path",
    [
        "/srv/gpupool/jobs/bob/123/stdout.log",  # another user's
        "/srv/gpupool/jobs/alice",  # the directory itself
        "/srv/gpupool/jobs/alice/../bob/x",
        "/etc/passwd",
        "/srv/gpupool/jobs/alicex/1/stdout.log",
    ],
)
def test_user_file_refuses_other_places(path):
    with pytest.raises(ValueError):
        MAP.user_file(path, "alice")
