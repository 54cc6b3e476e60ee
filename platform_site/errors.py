"""One place that maps errors to the platform REST error shape.

Services raise :class:`PlatformError` subclasses; the DRF exception handler below renders
them (and DRF's own errors) as ``{"error": {"code", "message", "details"}}``.
"""

from __future__ import annotations

import logging
from typing import Any

from django.core.exceptions import RequestDataTooBig
from django.db import InterfaceError, OperationalError
from django.http import Http404
from kombu.exceptions import OperationalError as BrokerError
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError
from rest_framework import exceptions, status
from rest_framework.response import Response


class PlatformError(Exception):
    """A domain error a caller can fix; carries its REST code and HTTP status."""

    code = "bad_request"
    status_code = status.HTTP_400_BAD_REQUEST

    def __init__(self, message: str, details: Any = None, *, code: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.details = details
        if code:
            self.code = code


class ValidationFailed(PlatformError):
    code = "validation_error"


class NotFound(PlatformError):
    code = "not_found"
    status_code = status.HTTP_404_NOT_FOUND


class Conflict(PlatformError):
    code = "conflict"
    status_code = status.HTTP_409_CONFLICT


class Forbidden(PlatformError):
    code = "forbidden"
    status_code = status.HTTP_403_FORBIDDEN


class PayloadTooLarge(PlatformError):
    code = "payload_too_large"
    status_code = status.HTTP_413_REQUEST_ENTITY_TOO_LARGE


class ServiceUnavailable(PlatformError):
    """A dependency (database, broker) is down: the caller should try again later."""

    code = "unavailable"
    status_code = status.HTTP_503_SERVICE_UNAVAILABLE


# Errors that mean "a dependency is unreachable right now", not "this request is wrong":
# answered 503 with Retry-After instead of a 500. DataError and IntegrityError are not here:
# they are bugs or bad input that must be refused earlier (platform_site.text).
OUTAGE_ERRORS: tuple[type[BaseException], ...] = (
    OperationalError,
    InterfaceError,
    BrokerError,
    RedisConnectionError,
    RedisTimeoutError,
)
RETRY_AFTER_SECONDS = 5

log = logging.getLogger(__name__)


def outage_error(exc: BaseException) -> ServiceUnavailable | None:
    """The 503 for ``exc`` if it is a dependency outage (the database or the broker)."""
    if not isinstance(exc, OUTAGE_ERRORS):
        return None
    what = "database" if isinstance(exc, OperationalError | InterfaceError) else "message broker"
    return ServiceUnavailable(
        f"The platform's {what} is unavailable; try again shortly.",
        {"retryAfter": RETRY_AFTER_SECONDS},
    )


def error_body(code: str, message: str, details: Any = None) -> dict[str, Any]:
    """The platform error shape."""
    return {"error": {"code": code, "message": message, "details": details}}


_DRF_CODES: dict[type[exceptions.APIException], str] = {
    exceptions.ParseError: "malformed_json",
    exceptions.ValidationError: "validation_error",
    exceptions.NotAuthenticated: "not_authenticated",
    exceptions.AuthenticationFailed: "authentication_failed",
    exceptions.PermissionDenied: "forbidden",
    exceptions.NotFound: "not_found",
    exceptions.MethodNotAllowed: "method_not_allowed",
    exceptions.UnsupportedMediaType: "unsupported_media_type",
    exceptions.Throttled: "throttled",
    exceptions.NotAcceptable: "not_acceptable",
}


def exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    """DRF exception handler producing the platform error shape for every API error."""
    outage = outage_error(exc)
    if outage is not None:
        log.warning("answering 503: %s: %s", type(exc).__name__, exc)
        exc = outage
    if isinstance(exc, PlatformError):
        response = Response(error_body(exc.code, exc.message, exc.details), status=exc.status_code)
        if isinstance(exc, ServiceUnavailable):
            response["Retry-After"] = str(RETRY_AFTER_SECONDS)
        return response
    if isinstance(exc, RequestDataTooBig):
        err = PayloadTooLarge("Request body is too large.")
        return Response(error_body(err.code, err.message), status=err.status_code)
    if isinstance(exc, Http404):
        exc = exceptions.NotFound(str(exc) or "Not found.")
    # Imported here: rest_framework.views reads the parser setting at import, and the
    # parser (platform_site.parsers) imports this module.
    from rest_framework.views import exception_handler as drf_exception_handler

    response = drf_exception_handler(exc, context)
    if response is None:
        return None
    code = next((c for k, c in _DRF_CODES.items() if isinstance(exc, k)), "error")
    details: Any = None
    if isinstance(exc, exceptions.ValidationError):
        details = response.data
        message = "The request is invalid: " + _flatten(response.data)
    else:
        message = str(getattr(exc, "detail", exc))
    response.data = error_body(code, message, details)
    return response


def _flatten(data: Any, prefix: str = "") -> str:
    """A one-line summary of DRF validation errors: ``field: message; other: message``."""
    if isinstance(data, dict):
        parts = [_flatten(v, f"{prefix}{k}." if prefix else f"{k}") for k, v in data.items()]
        return "; ".join(p for p in parts if p)
    if isinstance(data, list):
        return "; ".join(_flatten(v, prefix) for v in data)
    text = str(data)
    label = prefix.rstrip(".")
    return f"{label}: {text}" if label else text
