"""The pool's container images, defined once in a JSON file (deploy/images.json by default).

Each image is pinned by tag and digest and says what it holds (framework and its version, CUDA,
Python), the oldest NVIDIA driver its CUDA runs on, and which plans (plan codes) may use it.
`settings.IMAGE_CATALOGUE` is the checked file (settings load it at start-up, so a bad file
stops the process); the job spec refuses an image that is not listed or not on the user's
plan; deploy/devcluster/image_layout.py turns the same file into the dev cluster's stand-in
images, prewarmed as `/opt/enroot/images/<prewarm_file>`, and the node-side catalogue that
maps each reference to its file.

Pure and standard library only: the dev-cluster scripts load this file with the host's bare
python3, where Django is not installed.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

try:
    from django.core.exceptions import ImproperlyConfigured as _ConfigError
except ImportError:  # the host's python3 running deploy/devcluster/image_layout.py
    _ConfigError = ValueError  # type: ignore[assignment,misc]

DEFAULT_IMAGE_CATALOGUE_FILE = Path(__file__).resolve().parent.parent / "deploy" / "images.json"
# Where sites (and the dev cluster) keep prewarmed images on every node.
PREWARM_DIRECTORY = "/opt/enroot/images"

_REPOSITORY_RE = re.compile(r"(?:[a-z0-9.-]+(?::[0-9]{1,5})?/)?[a-z0-9]+(?:[._/-][a-z0-9]+)*", re.ASCII)
_TAG_RE = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}", re.ASCII)
_DIGEST_RE = re.compile(r"sha256:[0-9a-f]{64}", re.ASCII)
_VERSION_RE = re.compile(r"[0-9]+(?:\.[0-9]+){0,3}", re.ASCII)
_PLAN_RE = re.compile(r"[a-z0-9_-]{1,32}", re.ASCII)
_DOCKER_HUB_PREFIXES = ("docker.io/", "index.docker.io/", "registry-1.docker.io/")


def canonical_repository(repository: str) -> str:
    """Docker Hub's many spellings of one repository as one: docker.io/library/ubuntu -> ubuntu."""
    for prefix in _DOCKER_HUB_PREFIXES:
        if repository.startswith(prefix):
            repository = repository[len(prefix) :]
            break
    if repository.startswith("library/") and repository.count("/") == 1:
        repository = repository[len("library/") :]
    return repository


def version_tuple(version: str) -> tuple[int, ...]:
    """ "12.4.1" -> (12, 4, 1); "" -> () (unknown)."""
    return tuple(int(part) for part in version.split(".")) if version else ()


@dataclass(frozen=True)
class Image:
    repository: str
    tag: str
    digest: str
    title: str
    framework: str
    framework_version: str
    cuda: str
    python: str
    min_driver: str
    plans: tuple[str, ...]
    # Interactive apps the image ships (interactive/kinds.py): NVIDIA's framework images carry
    # JupyterLab; a bare CUDA or Docker Hub image does not.
    apps: tuple[str, ...] = ()

    @property
    def reference(self) -> str:
        """The reference users pick and see: repository:tag."""
        return f"{self.repository}:{self.tag}"

    @property
    def pinned_reference(self) -> str:
        """repository:tag@digest, what a site pulls."""
        return f"{self.reference}@{self.digest}"

    @property
    def prewarm_file(self) -> str:
        """The squashfs file name under PREWARM_DIRECTORY (one per reference, never shared)."""
        return re.sub(r"[^A-Za-z0-9._-]", "_", f"{self.repository}_{self.tag}") + ".sqsh"

    @property
    def prewarm_path(self) -> str:
        return f"{PREWARM_DIRECTORY}/{self.prewarm_file}"

    def allows(self, plan_code: str) -> bool:
        return plan_code in self.plans

    def driver_too_old(self, driver: str) -> bool:
        """Whether a node driver `driver` (e.g. "535.104.05") is older than this image's CUDA needs."""
        if not driver or not self.min_driver or not _VERSION_RE.fullmatch(driver.split("-")[0]):
            return False
        return version_tuple(driver.split("-")[0])[:2] < version_tuple(self.min_driver)[:2]


@dataclass(frozen=True)
class ImageCatalogue:
    images: tuple[Image, ...]
    digests_pinned: bool = False

    def find(self, repository: str, tag: str | None, digest: str | None) -> tuple[Image | None, str]:
        """The catalogue image a reference names, and "" or why it does not match.

        A reference names an image by tag (repository:tag), by its pinned digest
        (repository@digest), or by both (then both must agree). Docker Hub spellings are one.
        """
        wanted = canonical_repository(repository)
        candidates = [image for image in self.images if canonical_repository(image.repository) == wanted]
        if not candidates:
            return None, "not-listed"
        for image in candidates:
            if tag is not None and image.tag != tag:
                continue
            if digest is not None and image.digest != digest:
                if tag is not None:
                    return image, "digest-mismatch"
                continue
            if tag is None and digest is None:
                continue
            return image, ""
        return None, "not-listed"

    def for_plan(self, plan_code: str) -> tuple[Image, ...]:
        return tuple(image for image in self.images if image.allows(plan_code))

    def by_reference(self) -> dict[str, Image]:
        return {image.reference: image for image in self.images}


def _fail(path: Path | str, message: str) -> NoReturn:
    raise _ConfigError(f"image catalogue {path}: {message}")


def _text(path, where: str, entry: dict, key: str, pattern: re.Pattern | None, *, empty_ok: bool = False) -> str:
    value = entry.get(key, "")
    if not isinstance(value, str) or (not value and not empty_ok):
        _fail(path, f"{where}: {key} must be a non-empty string")
    if value and pattern is not None and not pattern.fullmatch(value):
        _fail(path, f"{where}: {key} {value!r} is malformed")
    return value


_APP_RE = re.compile(r"[a-z][a-z0-9-]{0,31}")


def _apps(path, where: str, apps: Any) -> tuple[str, ...]:
    if not isinstance(apps, list) or not all(isinstance(app, str) and _APP_RE.fullmatch(app) for app in apps):
        _fail(path, f"{where}: apps must be a list of app names (e.g. jupyterlab)")
    return tuple(apps)


def image_catalogue_from_mapping(data: Any, path: Path | str = "<data>") -> ImageCatalogue:
    if not isinstance(data, dict) or not isinstance(data.get("images"), list):
        _fail(path, "expected an object with an `images` list")
    images: list[Image] = []
    seen: set[str] = set()
    files: set[str] = set()
    for number, entry in enumerate(data["images"], start=1):
        where = f"image {number}"
        if not isinstance(entry, dict):
            _fail(path, f"{where}: expected an object")
        repository = _text(path, where, entry, "repository", _REPOSITORY_RE)
        tag = _text(path, where, entry, "tag", _TAG_RE)
        if tag.lower() == "latest":
            _fail(path, f"{where}: pin a version, not latest")
        plans = entry.get("plans")
        plan_codes_ok = isinstance(plans, list) and all(isinstance(p, str) and _PLAN_RE.fullmatch(p) for p in plans)
        if not plans or not plan_codes_ok:
            _fail(path, f"{where}: plans must be a non-empty list of plan codes")
        image = Image(
            repository=repository,
            tag=tag,
            digest=_text(path, where, entry, "digest", _DIGEST_RE),
            title=_text(path, where, entry, "title", None),
            framework=_text(path, where, entry, "framework", re.compile(r"[a-z0-9_-]{1,32}")),
            framework_version=_text(path, where, entry, "framework_version", None, empty_ok=True),
            cuda=_text(path, where, entry, "cuda", _VERSION_RE),
            python=_text(path, where, entry, "python", _VERSION_RE),
            min_driver=_text(path, where, entry, "min_driver", _VERSION_RE, empty_ok=True),
            plans=tuple(plans),
            apps=_apps(path, where, entry.get("apps", [])),
        )
        key = f"{canonical_repository(repository)}:{tag}"
        if key in seen:
            _fail(path, f"{where}: {image.reference} is listed twice")
        if image.prewarm_file in files:
            _fail(path, f"{where}: its prewarm file {image.prewarm_file} is another image's")
        seen.add(key)
        files.add(image.prewarm_file)
        images.append(image)
    return ImageCatalogue(images=tuple(images), digests_pinned=bool(data.get("digests_pinned", False)))


def load_image_catalogue(path: Path | str) -> ImageCatalogue:
    try:
        with open(path, encoding="utf-8") as handle:
            data = json.load(handle)
    except OSError as exc:
        _fail(path, f"cannot read it: {exc}")
    except ValueError as exc:
        _fail(path, f"not JSON: {exc}")
    return image_catalogue_from_mapping(data, path)
