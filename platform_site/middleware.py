"""Request limits for the REST API: body size, and the text rule for paths and queries.

DRF reads JSON bodies from the request stream, which bypasses Django's
``DATA_UPLOAD_MAX_MEMORY_SIZE`` check, and Django renders its own ``RequestDataTooBig`` as
an HTML 400. This middleware, placed first, refuses ``/api/`` bodies whose Content-Length
is over ``MAX_BODY_BYTES`` up front with 413 and the platform error shape, and turns a
``RequestDataTooBig`` raised by a view (e.g. reading ``request.POST``) into the same.

:class:`TextRuleMiddleware` refuses ``/api/`` requests whose path or query string holds a
NUL or a lone surrogate (``/api/a2a/agent-card/%00``, ``?skillId=a%00b``) with 400 naming
the parameter, before a view hands it to the database (PostgreSQL refuses NUL with a
``DataError``). Bodies are checked by :mod:`platform_site.parsers`. ``/admin/`` requests
get the same rule over path, query and form fields, answered in plain text; JSON typed
into admin forms is checked by :mod:`platform_site.admin_forms`.
"""

from __future__ import annotations

from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.http import HttpRequest, HttpResponse, HttpResponseBadRequest, JsonResponse
from django.utils.deprecation import MiddlewareMixin

from platform_site.errors import PayloadTooLarge, error_body
from platform_site.text import find_bad_text

API_PREFIX = "/api/"
ADMIN_PREFIX = "/admin/"


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
    found = find_bad_request_text(request)
    if found is None:
        return None
    field, message, problem = found
    body = error_body("invalid_text", message, {"field": field, "problem": problem})
    return JsonResponse(body, status=400)


def find_bad_request_text(
    request: HttpRequest, *, form: bool = False
) -> tuple[str, str, str] | None:
    """The first NUL or lone surrogate in the path, a query parameter or (``form``) a form
    field of the body, as ``(field, message, problem)``; None when all is clean."""
    bad = find_bad_text(request.path, "path")
    if bad is not None:
        return "path", f"The path contains {bad.what}, which is not allowed.", bad.what
    sources = [("Query parameter", request.GET)]
    if form and request.method == "POST":
        sources.append(("Form field", request.POST))
    for label, params in sources:
        for name, values in params.lists():
            bad = find_bad_text([name, *values])
            if bad is not None:
                message = f"{label} {name!r} contains {bad.what}, which is not allowed."
                return name, message, bad.what
    return None


class TextRuleMiddleware(MiddlewareMixin):
    """Answer 400 for ``/api/`` requests with a NUL or lone surrogate in path or query, and
    for ``/admin/`` requests with one in path, query or form fields.

    The admin's answer is plain text: its pages are HTML, and its forms, filters and object
    URLs hand what they are given to the database, where PostgreSQL refuses a NUL with a
    ``DataError`` (``/admin/a2a/task/?state__exact=%00`` was a 500).
    """

    def process_request(self, request: HttpRequest) -> HttpResponse | None:
        if request.path.startswith(API_PREFIX):
            return bad_text_response(request)
        if request.path.startswith(ADMIN_PREFIX):
            found = find_bad_request_text(request, form=True)
            if found is not None:
                return HttpResponseBadRequest(found[1], content_type="text/plain; charset=utf-8")
        return None
