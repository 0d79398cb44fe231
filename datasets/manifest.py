"""A version's checksum: the sha256 of its manifest, one line per file sorted by the path's
UTF-8 bytes, `<sha256 hex> <size> <path>\\n` (a path holds no newline: datasets.paths refuses
control characters). The same files give the same value wherever they were uploaded from."""

from __future__ import annotations

import hashlib


def manifest_lines(files) -> list[str]:
    """`files`: (path, size, sha256) triples."""
    ordered = sorted(files, key=lambda item: item[0].encode("utf-8"))
    return [f"{sha256} {size} {path}\n" for path, size, sha256 in ordered]


def manifest_sha256(files) -> str:
    digest = hashlib.sha256()
    for line in manifest_lines(files):
        digest.update(line.encode("utf-8"))
    return digest.hexdigest()
