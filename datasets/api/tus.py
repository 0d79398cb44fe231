"""The tus 1.0 headers, read strictly (https://tus.io/protocols/resumable-upload): pure
functions from header strings to values, each refusal a TusError with its status."""

from __future__ import annotations

import base64
import binascii
import re

VERSION = "1.0.0"
EXTENSIONS = "creation,checksum,concatenation"
CHECKSUM_ALGORITHMS = ("sha1", "sha256", "md5")
OFFSET_MEDIA_TYPE = "application/offset+octet-stream"
# Upload-Length and Upload-Offset: decimal digits only (no sign, no spaces), at most 19 digits
# so the value fits PostgreSQL's bigint.
NUMBER = re.compile(r"[0-9]{1,19}")
MAX_METADATA_CHARS = 8192
SHA256_HEX = re.compile(r"[0-9a-f]{64}")


class TusError(Exception):
    def __init__(self, message: str, status: int = 400, field_name: str = "headers"):
        super().__init__(message)
        self.message = message
        self.status = status
        self.field = field_name


def check_version(value: str | None) -> None:
    if value != VERSION:
        raise TusError(f"Send Tus-Resumable: {VERSION} (the only tus version served).", 412, "Tus-Resumable")


def read_number(value: str | None, name: str) -> int:
    if value is None:
        raise TusError(f"The {name} header is required.", 400, name)
    if not NUMBER.fullmatch(value) or int(value) > 2**63 - 1:
        raise TusError(f"{name} must be a whole number of bytes.", 400, name)
    return int(value)


def read_metadata(value: str | None) -> dict[str, str]:
    """Upload-Metadata: comma-separated `key base64(value)` pairs, keys unique; values must be UTF-8."""
    if not value:
        return {}
    if len(value) > MAX_METADATA_CHARS:
        raise TusError(f"Upload-Metadata may be at most {MAX_METADATA_CHARS} characters.", 400, "Upload-Metadata")
    found = {}
    for pair in value.split(","):
        parts = pair.strip().split(" ")
        if len(parts) not in (1, 2) or not parts[0] or parts[0] in found:
            raise TusError("Upload-Metadata must be comma-separated 'key base64value' pairs.", 400, "Upload-Metadata")
        raw = parts[1] if len(parts) == 2 else ""
        try:
            found[parts[0]] = base64.b64decode(raw, validate=True).decode("utf-8")
        except (binascii.Error, ValueError):
            raise TusError(
                f"Upload-Metadata {parts[0]!r} is not base64 of UTF-8 text.", 400, "Upload-Metadata"
            ) from None
    return found


def read_declared_sha256(metadata: dict[str, str]) -> str:
    declared = metadata.get("sha256", "").strip().lower()
    if declared and not SHA256_HEX.fullmatch(declared):
        raise TusError("The sha256 in Upload-Metadata must be 64 hexadecimal digits.", 400, "Upload-Metadata")
    return declared


def read_checksum(value: str | None) -> tuple[str, str] | None:
    """Upload-Checksum `<algorithm> <base64 digest>` -> (algorithm, hex digest), or None."""
    if value is None:
        return None
    parts = value.strip().split(" ")
    if len(parts) != 2 or parts[0] not in CHECKSUM_ALGORITHMS:
        raise TusError(
            "Upload-Checksum must be '<algorithm> <base64 digest>', the algorithm one of "
            + ", ".join(CHECKSUM_ALGORITHMS),
            400,
            "Upload-Checksum",
        )
    try:
        digest = base64.b64decode(parts[1], validate=True)
    except (binascii.Error, ValueError):
        raise TusError("Upload-Checksum's digest is not base64.", 400, "Upload-Checksum") from None
    return parts[0], digest.hex()


# A final upload's parts: their URLs (absolute or not), each ending in /uploads/<uuid>.
_PART_URL = re.compile(r"/uploads/([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})/?$")
MAX_CONCAT_CHARS = 16384


def read_concat(value: str | None) -> tuple[str, list[str]]:
    """Upload-Concat (tus concatenation): ("", []) when absent, ("partial", []), or ("final",
    the parts' upload ids in order)."""
    if value is None:
        return "", []
    value = value.strip()
    if value == "partial":
        return "partial", []
    if len(value) > MAX_CONCAT_CHARS or not value.startswith("final;"):
        raise TusError('Upload-Concat is "partial" or "final;<part URL> <part URL>...".', 400, "Upload-Concat")
    ids = []
    for url in value[len("final;") :].split():
        match = _PART_URL.search(url)
        if match is None:
            raise TusError(f"Upload-Concat: {url[:200]!r} is not an upload's URL.", 400, "Upload-Concat")
        ids.append(match[1])
    if not ids:
        raise TusError("Upload-Concat: name the parts' URLs.", 400, "Upload-Concat")
    return "final", ids
