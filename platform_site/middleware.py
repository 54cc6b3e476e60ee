"""Request-size limit for the REST API.

DRF reads JSON bodies from the request stream, which bypasses Django's
``DATA_UPLOAD_MAX_MEMORY_SIZE`` check, and Django renders its own ``RequestDataTooBig`` as
an HTML 400. This middleware, placed first, refuses ``/api/`` bodies whose Content-Length
is over ``MAX_BODY_BYTES`` up front with 413 and the platform error shape, and turns a
``RequestDataTooBig`` raised by a view (e.g. reading ``request.POST``) into the same.
"""

from __future__ import annotations

from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.utils.deprecation import MiddlewareMixin

from platform_site.errors import PayloadTooLarge, error_body

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
