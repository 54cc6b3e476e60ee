"""Lean ASGI handlers: Django's URLconf and views without the middleware stack.

Under ASGI, Django runs each synchronous middleware with two thread hops and gives every
request a fresh sync thread (hence a fresh database connection). Some paths need none of
the middleware (no session, no CSRF: they authenticate a token themselves), so they take a
:class:`LeanASGIHandler` through :func:`route_to`. What those paths still get from the
stack is kept here: the ``ALLOWED_HOSTS`` check (CommonMiddleware), the redirect of plain
http to https and the HSTS header when the settings ask for them, and the default security
headers (SecurityMiddleware, XFrameOptionsMiddleware).

Subclasses: :class:`a2a.face.asgi.FaceASGIHandler` (async views, disconnect handling) and
:class:`a2a.api.asgi.BearerAPIHandler` (sync views on a database thread pool).

Every handler, lean or not, builds its requests as :class:`SizedASGIRequest`: a body sent
chunked (no ``Content-Length``, as HTTP/1.1 allows) gets the length it turned out to have.
The other paths take :class:`PlatformASGIHandler`: the whole stack, and the request's
database connections closed at its end.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Awaitable, Callable
from typing import Any

from asgiref.sync import sync_to_async
from django.core.exceptions import DisallowedHost
from django.core.handlers.asgi import ASGIHandler, ASGIRequest
from django.core.handlers.exception import convert_exception_to_response, response_for_exception
from django.db import connections
from django.http import HttpRequest, HttpResponse
from django.middleware.security import SecurityMiddleware

from platform_site.shielded import to_the_end

Scope = dict[str, Any]
ASGIApp = Callable[[Scope, Any, Any], Awaitable[None]]

# What SecurityMiddleware and XFrameOptionsMiddleware would add to an answer.
SECURITY_HEADERS = {
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
    "X-Frame-Options": "DENY",
}


class SizedASGIRequest(ASGIRequest):
    """Django's ASGI request, with ``CONTENT_LENGTH`` set from the body read when the
    client sent none (a chunked body).

    Without it, Django REST framework reads no body at all (``Request._load_stream`` takes
    a missing length for an empty body: a chunked ``POST /api/tasks`` was a 400 "skillId:
    This field is required"), and Django's ``MAX_BODY_BYTES`` check on ``request.body``,
    which goes by the header, let a chunked body of any size through."""

    def __init__(self, scope: Scope, body_file: Any) -> None:
        super().__init__(scope, body_file)
        if "CONTENT_LENGTH" not in self.META:
            size = body_file.seek(0, os.SEEK_END)
            body_file.seek(0)
            if size:
                self.META["CONTENT_LENGTH"] = str(size)


def close_connections() -> None:
    """Close this thread's database connections (whatever ``CONN_MAX_AGE`` says)."""
    for connection in connections.all(initialized_only=True):
        connection.close()


class PlatformASGIHandler(ASGIHandler):
    """Django's ASGI handler, the whole middleware stack, for every path no lean handler
    takes; it builds :class:`SizedASGIRequest` and closes the request's database
    connections when the request ends.

    Django gives every request a thread of its own for its synchronous parts, so every
    request opens a connection of its own; ``CONN_MAX_AGE`` keeps it open at the request's
    end, and the thread's end frees it only when the cyclic garbage collector next runs.
    After a burst of 600 requests, daphne held 285 idle PostgreSQL connections minutes
    later, and the database refused every other client (``too many clients``). The close
    runs on the request's own thread (the same ``ThreadSensitiveContext``)."""

    request_class = SizedASGIRequest

    async def handle(self, scope: Scope, receive: Any, send: Any) -> None:
        try:
            await super().handle(scope, receive, send)
        finally:
            # To its end: daphne cancels a handler that outlived its client twice, and the
            # second cancel dropped this close, queued behind the view on the request's
            # thread (platform_site.shielded).
            await to_the_end(sync_to_async(close_connections)())


class LeanASGIHandler(ASGIHandler):
    """Django's ASGI handler with an empty middleware chain and no per-request thread."""

    request_class = SizedASGIRequest

    #: Whether the views are awaited on the event loop (else run by a sync chain).
    async_views: bool = False

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        # No ThreadSensitiveContext: Django's creates a fresh sync thread (and so a fresh
        # database connection) per request; the subclasses run ORM work on their pools.
        await self.handle(scope, receive, send)

    def load_middleware(self, is_async: bool = False) -> None:
        self._view_middleware = []
        self._template_response_middleware = []
        self._exception_middleware = []
        inner = self._get_response_async if self.async_views else self._get_response
        self._middleware_chain = convert_exception_to_response(inner)
        # Its request and response hooks only (SECURE_SSL_REDIRECT, SECURE_HSTS_SECONDS):
        # an https-only site means these paths too, where the bearer tokens travel.
        self._security = SecurityMiddleware(lambda request: HttpResponse())

    def check_host(self, request: HttpRequest) -> HttpResponse | None:
        """An error response if the Host is not in ``ALLOWED_HOSTS`` (as CommonMiddleware
        checks it), the redirect to https for a plain http request when
        ``SECURE_SSL_REDIRECT`` asks for it (as SecurityMiddleware does), else ``None``."""
        try:
            request.get_host()
        except DisallowedHost as exc:
            return self.bad_host_response(request, exc)
        return self._security.process_request(request)

    def bad_host_response(self, request: HttpRequest, exc: DisallowedHost) -> HttpResponse:
        """Django's 400, logged as Django does; subclasses may answer in their API's shape."""
        return response_for_exception(request, exc)

    def add_security_headers(self, request: HttpRequest, response: HttpResponse) -> HttpResponse:
        """Set the default security headers the view did not set itself, and HSTS on an
        https answer when ``SECURE_HSTS_SECONDS`` asks for it."""
        self._security.process_response(request, response)
        for name, value in SECURITY_HEADERS.items():
            response.headers.setdefault(name, value)
        return response


def release(response: HttpResponse) -> None:
    """Release the response's resources without sending request_finished."""
    for closer in response._resource_closers:
        with contextlib.suppress(Exception):
            closer()
    response._resource_closers.clear()
    response.closed = True


def route_to(handler: ASGIApp, predicate: Callable[[Scope], bool], app: ASGIApp) -> ASGIApp:
    """``app``, except HTTP requests whose scope matches ``predicate``, which ``handler``
    serves."""

    async def router(scope: Scope, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and predicate(scope):
            await handler(scope, receive, send)
        else:
            await app(scope, receive, send)

    return router
