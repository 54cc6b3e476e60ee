"""The A2A face's errors: what a client sees for every failure, in two tables.

:data:`DOMAIN_ERRORS` turns the domain errors the handler lets through (the dispatcher's
``PlatformError`` subclasses, the URL guard's refusals) into the face's protocol errors;
:data:`ERROR_TABLE` renders each protocol error on both bindings. HTTP+JSON renders
``google.rpc.Status`` (``{"error": {"code", "status", "message", "details":
[ErrorInfo]}}``); JSON-RPC renders ``{"code", "message", "data": [ErrorInfo]}`` with the
A2A codes -32001…-32009 and the JSON-RPC 2.0 standard codes. The reasons are the ones the
official ``a2a-sdk`` client maps back to its own exception classes.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django.core.exceptions import RequestDataTooBig

from a2a.exceptions import AgentInactive, InputInvalid, UnknownAgent, UnknownSkill
from agent_profiles.urlguard import UnsafeURL
from platform_site.errors import RETRY_AFTER_SECONDS, Conflict, PlatformError, outage_error

log = logging.getLogger(__name__)

ERROR_INFO_TYPE = "type.googleapis.com/google.rpc.ErrorInfo"
BAD_REQUEST_TYPE = "type.googleapis.com/google.rpc.BadRequest"
A2A_DOMAIN = "a2a-protocol.org"
PLATFORM_DOMAIN = "a2a-platform"


class FaceError(Exception):
    """A protocol error: the client sees it on either binding, mapped by :data:`ERROR_TABLE`."""

    default_message = "A2A error"

    def __init__(
        self,
        message: str | None = None,
        *,
        metadata: dict[str, Any] | None = None,
        violations: list[tuple[str, str]] | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        self.message = message or self.default_message
        self.metadata = metadata or {}
        # (field, description) pairs rendered as google.rpc.BadRequest field violations.
        self.violations = violations or []
        self.headers = headers or {}
        super().__init__(self.message)


class TaskNotFound(FaceError):
    default_message = "Task not found"


class TaskNotCancelable(FaceError):
    default_message = "Task cannot be canceled"


class PushNotificationNotSupported(FaceError):
    default_message = "Push notifications are not supported"


class UnsupportedOperation(FaceError):
    default_message = "This operation is not supported"


class ContentTypeNotSupported(FaceError):
    default_message = "Content type not supported: send application/json"


class InvalidAgentResponse(FaceError):
    default_message = "The agent's response is invalid"


class ExtendedAgentCardNotConfigured(FaceError):
    default_message = "The extended agent card is not configured"


class ExtensionSupportRequired(FaceError):
    default_message = "Extension support required"


class VersionNotSupported(FaceError):
    default_message = "A2A version not supported"


class InvalidParams(FaceError):
    default_message = "Invalid params"


class InvalidRequest(FaceError):
    default_message = "Invalid request"


class JSONParseError(FaceError):
    default_message = "Invalid JSON payload"


class MethodNotFound(FaceError):
    default_message = "Method not found"


class MethodNotAllowed(FaceError):
    default_message = "Method not allowed on this path"


class PayloadTooLarge(FaceError):
    default_message = "Request body is too large"


class AgentNotFound(FaceError):
    default_message = "No such agent"


class Unauthenticated(FaceError):
    default_message = "Authentication required: send Authorization: Bearer <token>"

    def __init__(self, message: str | None = None, **kwargs: Any) -> None:
        kwargs.setdefault("headers", {"WWW-Authenticate": 'Bearer realm="a2a"'})
        super().__init__(message, **kwargs)


class TooManyStreams(FaceError):
    default_message = "Too many task streams open"


class Unavailable(FaceError):
    default_message = "The platform is unavailable; try again shortly"


class InternalError(FaceError):
    default_message = "Internal error"


@dataclass(frozen=True)
class Mapping:
    """How one error class looks on the wire."""

    http_status: int
    grpc_status: str
    reason: str
    jsonrpc_code: int
    domain: str = A2A_DOMAIN


# The single table. HTTP statuses follow the A2A 1.0 error-code mapping; reasons are the
# a2a-sdk's (its client maps them back to TaskNotFoundError & co.).
ERROR_TABLE: dict[type[FaceError], Mapping] = {
    TaskNotFound: Mapping(404, "NOT_FOUND", "TASK_NOT_FOUND", -32001),
    TaskNotCancelable: Mapping(409, "FAILED_PRECONDITION", "TASK_NOT_CANCELABLE", -32002),
    PushNotificationNotSupported: Mapping(
        400, "UNIMPLEMENTED", "PUSH_NOTIFICATION_NOT_SUPPORTED", -32003
    ),
    UnsupportedOperation: Mapping(400, "UNIMPLEMENTED", "UNSUPPORTED_OPERATION", -32004),
    ContentTypeNotSupported: Mapping(415, "INVALID_ARGUMENT", "CONTENT_TYPE_NOT_SUPPORTED", -32005),
    InvalidAgentResponse: Mapping(502, "INTERNAL", "INVALID_AGENT_RESPONSE", -32006),
    ExtendedAgentCardNotConfigured: Mapping(
        400, "FAILED_PRECONDITION", "EXTENDED_AGENT_CARD_NOT_CONFIGURED", -32007
    ),
    ExtensionSupportRequired: Mapping(
        400, "FAILED_PRECONDITION", "EXTENSION_SUPPORT_REQUIRED", -32008
    ),
    VersionNotSupported: Mapping(400, "UNIMPLEMENTED", "VERSION_NOT_SUPPORTED", -32009),
    InvalidParams: Mapping(400, "INVALID_ARGUMENT", "INVALID_PARAMS", -32602),
    InvalidRequest: Mapping(400, "INVALID_ARGUMENT", "INVALID_REQUEST", -32600),
    JSONParseError: Mapping(400, "INVALID_ARGUMENT", "INVALID_REQUEST", -32700),
    MethodNotFound: Mapping(404, "NOT_FOUND", "METHOD_NOT_FOUND", -32601),
    MethodNotAllowed: Mapping(405, "UNIMPLEMENTED", "UNSUPPORTED_OPERATION", -32601),
    PayloadTooLarge: Mapping(413, "INVALID_ARGUMENT", "INVALID_REQUEST", -32600),
    AgentNotFound: Mapping(404, "NOT_FOUND", "AGENT_NOT_FOUND", -32602, PLATFORM_DOMAIN),
    # JSON-RPC has no standard code for authentication; -32000 is the implementation-defined
    # server error just outside the A2A range.
    Unauthenticated: Mapping(401, "UNAUTHENTICATED", "UNAUTHENTICATED", -32000, PLATFORM_DOMAIN),
    # Also -32000 (A2A defines no code for it): the reason tells them apart.
    TooManyStreams: Mapping(429, "RESOURCE_EXHAUSTED", "TOO_MANY_STREAMS", -32000, PLATFORM_DOMAIN),
    # A dependency (the database, the broker) is down: retryable, unlike INTERNAL.
    Unavailable: Mapping(503, "UNAVAILABLE", "UNAVAILABLE", -32000, PLATFORM_DOMAIN),
    InternalError: Mapping(500, "INTERNAL", "INTERNAL_ERROR", -32603),
}


# --- domain errors → protocol errors (the one place the face translates) --------------


def _details(exc: PlatformError) -> dict[str, Any]:
    return {"code": exc.code}


def _violations(exc: PlatformError) -> list[tuple[str, str]] | None:
    details = exc.details if isinstance(exc.details, dict) else {}
    return [(str(k), str(v)) for k, v in details.items()] or None


def _unknown_skill(exc: PlatformError) -> FaceError:
    details = exc.details if isinstance(exc.details, dict) else {}
    return InvalidParams(
        exc.message,
        metadata={"skillId": str(details.get("skillId", "")), "code": exc.code},
        violations=[("metadata.skillId", "unknown or inactive skill")],
    )


def _data_field(path: Any) -> str:
    """A schema error's path (``a/0/b``, ``(root)``) as a field of the data part; the
    skill's schema itself where it cannot be applied (``(schema)``: not the caller's)."""
    if path == "(schema)":
        return "metadata.skillId"
    if not isinstance(path, str) or path in ("", "(root)"):
        return "data"
    return "data." + path.replace("/", ".")


def _input_invalid(exc: PlatformError) -> FaceError:
    """The data part's input does not fit the skill's ``input_schema``: each error as a
    violation on the data's path (``data`` alone for the whole object)."""
    details = exc.details if isinstance(exc.details, dict) else {}
    errors = [e for e in details.get("errors") or [] if isinstance(e, dict)]
    violations = [
        (_data_field(e.get("path")), e["message"])
        for e in errors
        if isinstance(e.get("message"), str)
    ]
    return InvalidParams(exc.message, metadata=_details(exc), violations=violations or None)


def _agent_inactive(exc: PlatformError) -> FaceError:
    """A reply to a task whose agent is disabled or awaiting approval: the task cannot
    take the message now (as a final task cannot: UNSUPPORTED_OPERATION), the agent and
    why in the ErrorInfo's metadata, for a person to reassign it."""
    details = exc.details if isinstance(exc.details, dict) else {}
    keep = ("agentId", "skillId", "reason")
    return UnsupportedOperation(
        exc.message, metadata={**_details(exc), **{k: details[k] for k in keep if k in details}}
    )


def _unsafe_url(exc: PlatformError) -> FaceError:
    return InvalidParams(f"Webhook URL refused: {exc.message}", violations=[("url", exc.message)])


# First match wins: more specific classes first.
DOMAIN_ERRORS: list[tuple[type[Exception], Callable[[Any], FaceError]]] = [
    (UnknownSkill, _unknown_skill),
    (UnsafeURL, _unsafe_url),
    (InputInvalid, _input_invalid),
    (UnknownAgent, lambda e: InvalidParams(e.message, metadata=_details(e))),
    (AgentInactive, _agent_inactive),
    (Conflict, lambda e: UnsupportedOperation(e.message, metadata=_details(e))),
    (
        PlatformError,
        lambda e: InvalidParams(e.message, metadata=_details(e), violations=_violations(e)),
    ),
    (RequestDataTooBig, lambda e: PayloadTooLarge()),
]


# Where one operation gives a domain error its own meaning.
OPERATION_ERRORS: dict[tuple[str, type[Exception]], Callable[[Any], FaceError]] = {
    ("cancel_task", Conflict): lambda e: TaskNotCancelable(e.message, metadata=_details(e)),
}


def as_face_error(exc: BaseException, operation: str = "") -> FaceError:
    """Any exception as the protocol error a client sees (unexpected ones are logged)."""
    if isinstance(exc, FaceError):
        return exc
    for (op, cls), convert in OPERATION_ERRORS.items():
        if op == operation and isinstance(exc, cls):
            return convert(exc)
    for cls, convert in DOMAIN_ERRORS:
        if isinstance(exc, cls):
            return convert(exc)
    outage = outage_error(exc)
    if outage is not None:  # as under /api/: 503 with Retry-After, logged without a trace
        log.warning("A2A face: %s (%s)", outage.message, type(exc).__name__)
        return Unavailable(outage.message, headers={"Retry-After": str(RETRY_AFTER_SECONDS)})
    log.error("unexpected error in the A2A face", exc_info=exc)
    return InternalError()


def mapping_for(error: FaceError) -> Mapping:
    """The table row of ``error``'s class (or its nearest mapped base)."""
    for cls in type(error).__mro__:
        if cls in ERROR_TABLE:
            return ERROR_TABLE[cls]  # type: ignore[index]
    return ERROR_TABLE[InternalError]


def _string_map(metadata: dict[str, Any]) -> dict[str, str]:
    # google.rpc.ErrorInfo.metadata is map<string, string>.
    return {
        str(k): v if isinstance(v, str) else json.dumps(v, default=str) for k, v in metadata.items()
    }


def error_details(error: FaceError) -> list[dict[str, Any]]:
    """The typed ``details`` array: an ErrorInfo first, then field violations if any."""
    mapping = mapping_for(error)
    details: list[dict[str, Any]] = [
        {
            "@type": ERROR_INFO_TYPE,
            "reason": mapping.reason,
            "domain": mapping.domain,
            "metadata": _string_map(error.metadata),
        }
    ]
    if error.violations:
        details.append(
            {
                "@type": BAD_REQUEST_TYPE,
                "fieldViolations": [{"field": f, "description": d} for f, d in error.violations],
            }
        )
    return details


def rest_error_body(error: FaceError) -> tuple[int, dict[str, Any]]:
    """HTTP status and ``google.rpc.Status`` JSON body for the HTTP+JSON binding."""
    mapping = mapping_for(error)
    body = {
        "error": {
            "code": mapping.http_status,
            "status": mapping.grpc_status,
            "message": error.message,
            "details": error_details(error),
        }
    }
    return mapping.http_status, body


def jsonrpc_error_body(error: FaceError, request_id: str | int | None) -> dict[str, Any]:
    """A JSON-RPC 2.0 error response for ``error``."""
    mapping = mapping_for(error)
    return {
        "jsonrpc": "2.0",
        "id": request_id,
        "error": {
            "code": mapping.jsonrpc_code,
            "message": error.message,
            "data": error_details(error),
        },
    }
