"""What the OpenAPI schema says beyond what drf-spectacular reads from the views: the
bearer token scheme, the error bodies, and links between operations.

Imported by the URLconf (gpupool/urls.py), so the token scheme is registered before any
schema is made: drf-spectacular finds extensions by their class having been defined."""

from __future__ import annotations

import re

from drf_spectacular.extensions import OpenApiAuthenticationExtension
from drf_spectacular.plumbing import build_bearer_security_scheme_object
from drf_spectacular.utils import OpenApiResponse
from drf_spectacular.views import SpectacularAPIView

from foundation.api.errors import error_responses


class BearerTokenScheme(OpenApiAuthenticationExtension):
    target_class = "accounts.authentication.BearerTokenAuthentication"
    name = "bearerAuth"

    def get_security_definition(self, auto_schema):
        scheme = build_bearer_security_scheme_object("Authorization", "Bearer", bearer_format="gpt_...")
        scheme["description"] = "An API token from the portal's API tokens page or `manage.py create_api_token`."
        return scheme


ERROR_DESCRIPTIONS = {
    400: "Bad input: `errors` names each field and what is wrong with it",
    401: "No credentials, or an unknown or revoked token",
    403: "Refused: over the plan's quota, the monthly budget spent with its hold on, or (with the session cookie) "
    "no CSRF token",
    404: "No such job among the caller's",
    409: "Not possible in the job's state, or the account is not ready",
    413: "The body is larger than the API accepts",
    415: "The body is not JSON",
    429: "Too many requests: wait `Retry-After` seconds",
}


def errors(*codes: int) -> dict[int, OpenApiResponse]:
    """`responses` entries for the refusals a job operation can answer, each with its body."""
    return error_responses(ERROR_DESCRIPTIONS, *codes)


# Bodies that list their fields completely: anything else is refused as "unknown field".
CLOSED_BODIES = ("JobSpecInput", "JobCloneInput", "SweepInput")

# The operations a job's id leads to, from each response that carries a job.
JOB_LINKS = {
    "GetJob": "jobs_retrieve",
    "GetJobLogs": "jobs_logs",
    "CancelJob": "jobs_cancel",
    "CloneJob": "jobs_clone",
}
RESPONSES_WITH_A_JOB = {
    ("jobs_create", "201"),
    ("jobs_submit", "201"),
    ("jobs_clone", "201"),
    ("jobs_retrieve", "200"),
    ("jobs_cancel", "200"),
}


def postprocess(result, generator, request, public):
    """drf-spectacular's last step (SPECTACULAR_SETTINGS["POSTPROCESSING_HOOKS"])."""
    # The router accepts a job's actions with or without a trailing slash; the schema shows
    # them as the README does (/api/v1/jobs/{id}/logs). The list, a job and a job's files (a
    # folder, /api/v1/jobs/{id}/files/, not a router's action) keep theirs.
    paths = {}
    for path, item in result.get("paths", {}).items():
        if re.fullmatch(r"/api/v1/jobs/\{id\}/(?!files/)\w+/", path):
            path = path.rstrip("/")
        paths[path] = item
    result["paths"] = paths

    schemas = result.get("components", {}).get("schemas", {})
    for name in CLOSED_BODIES:
        if name in schemas:
            schemas[name]["additionalProperties"] = False

    for item in paths.values():
        for operation in item.values():
            if not isinstance(operation, dict):
                continue
            for status_code, response in operation.get("responses", {}).items():
                if (operation.get("operationId"), status_code) in RESPONSES_WITH_A_JOB:
                    response["links"] = {
                        link: {
                            "operationId": target,
                            "parameters": {"id": "$response.body#/id"},
                            "description": "The job in this response",
                        }
                        for link, target in JOB_LINKS.items()
                    }
    return result


# The route of the schema (gpupool/urls.py); importing it from here registers the token scheme.
schema_view = SpectacularAPIView.as_view()
