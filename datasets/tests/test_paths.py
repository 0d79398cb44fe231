"""A file's path in a version is a user's word: refused unless plainly relative and bounded."""

import pytest

from datasets.paths import MAX_COMPONENT_BYTES, MAX_DEPTH, MAX_PATH_BYTES, PathError, clashes, clean_relative_path


@pytest.mark.parametrize(
    "path", ["a.txt", "train/0001.jpg", "deep/er/still/x.bin", "spaces are fine.txt", "naïve/файл.csv", ".hidden"]
)
def test_plain_relative_paths_pass(path):
    assert clean_relative_path(path) == path


@pytest.mark.parametrize(
    "path",
    [
        "",
        "/etc/passwd",
        "../escape",
        "a/../../b",
        "a/./b",
        "a//b",
        "a/",
        "..",
        ".",
        "nul\x00byte",
        "new\nline",
        "tab\tname",
        "win\\path",
        "x" * (MAX_PATH_BYTES + 1),
        "y" * (MAX_COMPONENT_BYTES + 1),
        "/".join(["d"] * (MAX_DEPTH + 1)),
        "é" * (MAX_PATH_BYTES // 2 + 1),  # within the characters, over the bytes
        None,
        7,
    ],
)
def test_hostile_paths_are_refused(path):
    with pytest.raises(PathError) as refused:
        clean_relative_path(path)
    assert str(refused.value)


def test_paths_are_normalised_so_one_name_is_one_file():
    decomposed = "cafe\u0301.txt"
    assert clean_relative_path(decomposed) == "caf\u00e9.txt"


def test_a_file_and_a_folder_of_the_same_name_clash():
    assert clashes("a", ["a/b"]) == "a/b"
    assert clashes("a/b", ["a"]) == "a"
    assert clashes("a", ["a"]) == "a"
    assert clashes("ab", ["a", "a/c", "abc"]) is None
