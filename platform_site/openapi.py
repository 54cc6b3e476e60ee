"""Make the OpenAPI schema tell the truth about errors and enforced constraints.

drf-spectacular documents what a view declares; the answers every route can give (the
text rule's 400, the outage 503, the 401/403 of authenticated routes, the 404 of a path
that matches no object, 413/415 for bodies, 409 for a task in the wrong state, 406 for
an Accept header without JSON) come from shared layers, so one postprocessing hook adds
them, all in the platform error shape
(``#/components/schemas/Error``). It also writes the text rule into the schema: request
strings and query parameters carry a pattern without NUL. ``tests/test_openapi_fuzz.py``
(schemathesis) checks every answer against the result.

The routes serving the schema and its pages (:class:`SchemaView`, :class:`SwaggerView`,
:class:`RedocView`) answer their own errors in the same JSON shape, not in YAML or HTML.
"""

from __future__ import annotations

import re
from typing import Any

from drf_spectacular.views import SpectacularAPIView, SpectacularRedocView, SpectacularSwaggerView
from rest_framework.renderers import JSONRenderer
from rest_framework.request import Request
from rest_framework.response import Response

from agent_profiles.models import SLUG_RE
from platform_site.errors import RETRY_AFTER_SECONDS
from platform_site.text import MAX_JSON_DEPTH

# No NUL (PostgreSQL refuses it). Lone surrogates are refused too; they cannot be sent as
# UTF-8 at all, only as JSON escapes, so the pattern does not mention them.
NO_NUL = "^[^\\u0000]*$"

ERROR_SCHEMA: dict[str, Any] = {
    "type": "object",
    "description": "The platform error shape.",
    "required": ["error"],
    "properties": {
        "error": {
            "type": "object",
            "required": ["code", "message"],
            "properties": {
                "code": {"type": "string", "example": "validation_error"},
                "message": {"type": "string"},
                "details": {"description": "Code-specific detail (often the field)."},
            },
        }
    },
}

# A UUID in either case (a2a.urls.AnyCaseUUIDConverter). drf-spectacular gives a custom
# converter's path parameter its regex as pattern; the hook below says format: uuid.
UUID_ANY_CASE = "[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"

TEXT_RULE = (
    f"A NUL character or a lone surrogate anywhere (path, query, body) is refused "
    f"(`invalid_text`, naming the field), as is JSON nested deeper than {MAX_JSON_DEPTH} "
    "levels (`json_too_deep`) and NaN/Infinity."
)
DESCRIPTIONS = {
    "400": "The request is invalid (`validation_error`, `malformed_json`, `invalid_text`, "
    "`json_too_deep`, ...). " + TEXT_RULE,
    "401": "No valid credentials (`not_authenticated`, `authentication_failed`).",
    "403": "Authenticated, but not allowed (`forbidden`).",
    "404": "No such object, or none visible to the caller (`not_found`).",
    "406": "The Accept header allows no `application/json`, the only type the API answers "
    "(`not_acceptable`).",
    "409": "The task is not in a state that allows this (`invalid_state`), or the request "
    "conflicts with an earlier one (`conflict`).",
    "413": "The body is larger than MAX_BODY_BYTES (`payload_too_large`).",
    "415": "The body is not JSON (`unsupported_media_type`).",
    "503": "The database or the broker is unavailable (`unavailable`); retry after "
    "`Retry-After` seconds.",
}
# Operations that act on a task in a given state, or create one with an idempotency key.
CONFLICTS = re.compile(r"^/api/tasks(/\{[^}]+\}/(reply|cancel|retry|reassign))?$")


def _error(code: str) -> dict[str, Any]:
    response: dict[str, Any] = {
        "description": DESCRIPTIONS[code],
        "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}},
    }
    if code == "503":
        response["headers"] = {
            "Retry-After": {
                "description": f"Seconds to wait ({RETRY_AFTER_SECONDS}).",
                "schema": {"type": "integer"},
            }
        }
    return response


def _codes(path: str, method: str, operation: dict[str, Any]) -> list[str]:
    # 406: DRF's content negotiation refuses an Accept header without JSON on every route.
    codes = ["400", "406", "503"]
    if "{" in path:
        codes.append("404")
    security = operation.get("security") or []
    if any(requirement for requirement in security):
        codes += ["401", "403"]
    if "requestBody" in operation:
        codes += ["413", "415"]
    if method == "post" and CONFLICTS.match(path):
        codes.append("409")
    return codes


def _no_nul(schema: dict[str, Any]) -> None:
    """Add the NUL-free pattern to a string schema (and to strings inside it)."""
    if schema.get("type") == "string" and "format" not in schema and "enum" not in schema:
        schema.setdefault("pattern", NO_NUL)
    for child in (schema.get("properties") or {}).values():
        _no_nul(child)
    if isinstance(schema.get("items"), dict):
        _no_nul(schema["items"])


def document_errors_and_text_rule(result: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
    """drf-spectacular postprocessing hook (see the module docstring)."""
    components = result.setdefault("components", {})
    components.setdefault("schemas", {})["Error"] = ERROR_SCHEMA
    for path, operations in (result.get("paths") or {}).items():
        if not path.startswith("/api/"):
            continue
        for method, operation in operations.items():
            if not isinstance(operation, dict) or "responses" not in operation:
                continue
            responses = operation["responses"]
            for code in _codes(path, method, operation):
                responses.setdefault(code, _error(code))
            for parameter in operation.get("parameters") or []:
                if parameter.get("in") in ("query", "path"):
                    _uuid_any_case(parameter.setdefault("schema", {}))
                    _no_nul(parameter["schema"])
            _describe_skill_id(operation)
    for name, schema in components["schemas"].items():
        if name.endswith("Request"):
            _no_nul(schema)
    return result


def _uuid_any_case(schema: dict[str, Any]) -> None:
    if schema.get("pattern") in (UUID_ANY_CASE, f"^{UUID_ANY_CASE}$"):
        schema.update(format="uuid", pattern=f"^{UUID_ANY_CASE}$")


def _describe_skill_id(operation: dict[str, Any]) -> None:
    for parameter in operation.get("parameters") or []:
        if parameter.get("name") == "skillId":
            parameter["schema"].setdefault("pattern", SLUG_RE)
            parameter.setdefault("description", "An active skill's id (GET /api/a2a/skills).")


class _JSONErrors:
    """Errors of the schema and docs routes in the platform error shape, as JSON.

    drf-spectacular's views render with their own renderers (YAML for the schema, HTML
    for the pages), so a 405, the 404 of ``?format=xml`` or a 406 came as YAML or HTML
    while every other ``/api/`` route answers JSON.
    """

    def finalize_response(
        self, request: Request, response: Any, *args: Any, **kwargs: Any
    ) -> Response:
        if isinstance(response, Response) and response.exception:
            request.accepted_renderer = JSONRenderer()
            request.accepted_media_type = JSONRenderer.media_type
        return super().finalize_response(request, response, *args, **kwargs)  # type: ignore[misc]


class SchemaView(_JSONErrors, SpectacularAPIView):
    """``/api/schema/``: the OpenAPI document (YAML, or JSON for ``Accept: application/json``
    or ``?format=json``)."""


class SwaggerView(_JSONErrors, SpectacularSwaggerView):
    """``/api/docs/``: Swagger UI."""


class RedocView(_JSONErrors, SpectacularRedocView):
    """``/api/redoc/``: Redoc."""
