"""Plotly's browser bundle as a static file, `vendor/plotly.min.js`, from the installed Python
package (one version for the figures the server builds and the script that draws them; no
CDN). As a static file it gets what the others get: a hashed name cached for a year, and gzip
and brotli copies made once by collectstatic (4.8 MB becomes about 1.4 MB and 1.1 MB)."""

from __future__ import annotations

from pathlib import Path

import plotly
from django.contrib.staticfiles.finders import BaseFinder
from django.core.files.storage import FileSystemStorage

BUNDLE = "vendor/plotly.min.js"
_PACKAGE_DATA = Path(plotly.__file__).resolve().parent / "package_data"


class PlotlyFinder(BaseFinder):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.storage = FileSystemStorage(location=str(_PACKAGE_DATA))
        self.storage.prefix = "vendor"  # collectstatic writes it as vendor/plotly.min.js

    def check(self, **kwargs):
        return []

    def find(self, path, find_all=False, **kwargs):
        if path != BUNDLE:
            return [] if find_all else None
        found = str(_PACKAGE_DATA / "plotly.min.js")
        return [found] if find_all else found

    def list(self, ignore_patterns):
        # Under its prefix, as FileSystemFinder lists a prefixed STATICFILES_DIRS entry.
        yield "plotly.min.js", self.storage
