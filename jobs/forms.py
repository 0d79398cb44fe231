"""The job form's fields, values and errors. Validation itself is jobs.submission.spec.parse_job_spec,
shared with the API, so the browser and the API refuse exactly the same things."""

from __future__ import annotations

from jobs.submission.clusters import ANY
from jobs.submission.spec import FIELDS as SPEC_FIELDS

# The spec's fields, but the environment, which the form takes as NAME=value lines, and the
# datasets, a checkbox per version.
FIELDS = [field for field in SPEC_FIELDS if field not in ("environment", "datasets")]


def form_data_from_post(post) -> dict:
    """Only the fields that were filled in: an empty gpu_memory_gb means "whole GPUs"."""
    data = {field: post.get(field, "").strip() for field in FIELDS if post.get(field, "").strip()}
    if "command" in data:
        # Keep the user's whitespace, but browsers send textarea lines as CRLF: a "\r" left at
        # the end of "sleep 5" makes bash run `sleep '5\r'`, which fails.
        data["command"] = _unix_newlines(post.get("command"))
    environment = _unix_newlines(post.get("environment", "")).strip()
    if environment:
        data["environment"] = environment
    datasets = [value for value in post.getlist("datasets") if value.strip()]
    if datasets:
        data["datasets"] = datasets
    return data


def combination_errors(data: dict, *, own_cluster: str) -> dict[str, list[str]]:
    """Choices the form refuses together, by field, before anything is submitted (the page does
    not offer them either). A spot job takes idle GPUs of the portal's own cluster, the only
    one with the spot partition (jobs/submission/clusters.py): not a further cluster's."""
    spot = data.get("spot") in (True, "1", "true", "on")
    cluster = data.get("cluster")
    if spot and cluster not in (None, "", own_cluster, ANY):
        return {
            "cluster": [
                f"A spot job runs on {own_cluster} only, on its idle GPUs: choose {own_cluster} or Any, or untick Spot."
            ]
        }
    return {}


def initial_from_spec(spec: dict) -> dict:
    values = {field: spec.get(field, "") for field in FIELDS}
    environment = spec.get("environment") or {}
    values["environment"] = "\n".join(f"{key}={value}" for key, value in environment.items())
    return {key: "" if value is None else value for key, value in values.items()}


def _unix_newlines(text: str) -> str:
    return text.replace("\r\n", "\n").replace("\r", "\n")


# The job form's "Run as a sweep": sweeps/ sits above jobs/ and registers what takes the form then
# (sweeps.forms.quote_or_submit: `(request, job data, POST) -> an outcome with .sweep, .errors,
# .context`) in its AppConfig.ready(). Without it the checkbox does nothing but a plain job.
_sweep_form = None


def register_sweep_form(handler) -> None:
    global _sweep_form
    _sweep_form = handler


def sweep_form():
    return _sweep_form
