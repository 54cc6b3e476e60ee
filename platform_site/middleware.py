"""Request limits for the REST API: body size, and the text rule for paths and queries.

DRF reads JSON bodies from the request stream, which bypasses Django's
``DATA_UPLOAD_MAX_MEMORY_SIZE`` check, and Django renders its own ``RequestDataTooBig`` as
an HTML 400. This middleware, placed first, refuses ``/api/`` bodies whose Content-Length
is over ``MAX_BODY_BYTES`` up front with 413 and the platform error shape, and turns a
``RequestDataTooBig`` raised by a view (e.g. reading ``request.POST``) into the same.

:class:`TextRuleMiddleware` refuses ``/api/`` requests whose path or query string holds a
NUL or a lone surrogate (``/api/a2a/agent-card/%00``, ``?skillId=a%00b``) with 400 naming
the parameter, before a view hands it to the database (PostgreSQL refuses NUL with a
``DataError``). Bodies are checked by :mod:`platform_site.parsers`.
"""

from __future__ import annotations

from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.utils.deprecation import MiddlewareMixin

from platform_site.errors import PayloadTooLarge, error_body
from platform_site.text import find_bad_text

API_PREFIX = "/api/"


def too_large_response() -> JsonResponse:
    """The 413 answer in the platform error shape."""
    err = PayloadTooLarge(
        f"Request body is too large: the limit is {settings.MAX_BODY_BYTES} bytes.",
        {"maxBytes": settings.MAX_BODY_BYTES},
    )
    return JsonResponse(error_body(err.code, err.message, err.details), status=err.status_code)


def declared_length(request: HttpRequest) -> int:
    """The request's Content-Length, or 0 when absent or unreadable."""
    try:
        return int(request.META.get("CONTENT_LENGTH") or 0)
    except ValueError:
        return 0


class BodyLimitMiddleware(MiddlewareMixin):
    """Answer 413 (platform error shape) for ``/api/`` bodies over ``MAX_BODY_BYTES``.

    A ``MiddlewareMixin`` so it runs natively in both the sync and async request paths.
    """

    def process_request(self, request: HttpRequest) -> HttpResponse | None:
        if not request.path.startswith(API_PREFIX):
            return None
        if declared_length(request) > settings.MAX_BODY_BYTES:
            return too_large_response()
        return None

    def process_exception(self, request: HttpRequest, exc: Exception) -> HttpResponse | None:
        if request.path.startswith(API_PREFIX) and isinstance(exc, RequestDataTooBig):
            return too_large_response()
        return None


def bad_text_response(request: HttpRequest) -> JsonResponse | None:
    """A 400 (platform error shape) if the path or a query parameter breaks the text rule."""
    bad = find_bad_text(request.path, "path")
    if bad is not None:
        message = f"The path contains {bad.what}, which is not allowed."
        return _invalid_text("path", message, bad.what)
    for name, values in request.GET.lists():
        bad = find_bad_text([name, *values])
        if bad is not None:
            message = f"Query parameter {name!r} contains {bad.what}, which is not allowed."
            return _invalid_text(name, message, bad.what)
    return None


def _invalid_text(field: str, message: str, problem: str) -> JsonResponse:
    body = error_body("invalid_text", message, {"field": field, "problem": problem})
    return JsonResponse(body, status=400)


class TextRuleMiddleware(MiddlewareMixin):
    """Answer 400 for ``/api/`` requests with a NUL or lone surrogate in path or query."""

    def process_request(self, request: HttpRequest) -> HttpResponse | None:
        if not request.path.startswith(API_PREFIX):
            return None
        return bad_text_response(request)
