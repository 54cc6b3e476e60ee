"""A lean ASGI entry for the A2A face.

The face's views authenticate, parse and render themselves; Django's middleware stack
(sessions, CSRF, messages, ...) adds nothing to them but, under ASGI, costs two thread hops
per synchronous middleware per request. This handler serves ``/v1/a2a/...`` and
``/.well-known/agent-card.json`` with the same URLconf and views, without the middleware
and the request signals (the face tidies database connections itself, see
:mod:`a2a.face.db`). Everything else goes to the normal Django application.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from typing import Any

from asgiref.sync import sync_to_async
from django.conf import settings
from django.core.exceptions import DisallowedHost, RequestAborted
from django.core.handlers.asgi import ASGIHandler, get_script_prefix
from django.core.handlers.exception import convert_exception_to_response
from django.http import HttpRequest, HttpResponse
from django.urls import set_script_prefix, set_urlconf
from django.utils.log import log_response

from a2a.face.errors import InvalidRequest

ASGIApp = Callable[[dict[str, Any], Any, Any], Awaitable[None]]
FACE_PREFIXES = ("/v1/a2a/", "/.well-known/agent-card.json")
SECURITY_HEADERS = {"X-Content-Type-Options": "nosniff", "Referrer-Policy": "same-origin"}


def is_face_path(path: str) -> bool:
    return path == "/v1/a2a" or path.startswith(FACE_PREFIXES)


class FaceASGIHandler(ASGIHandler):
    """Django's ASGI handler with an empty middleware chain and no request signals."""

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        # No ThreadSensitiveContext: Django's creates a fresh sync thread (and so a fresh
        # database connection) per request; the face's ORM calls use a2a.face.db's pool.
        await self.handle(scope, receive, send)

    async def get_response_async(self, request: HttpRequest) -> HttpResponse:
        """Django's, minus the log line (and thread hop) for every 4xx: client errors such
        as TaskNotFound are ordinary on this API. Server errors are still logged."""
        set_urlconf(settings.ROOT_URLCONF)
        response = await self._middleware_chain(request)
        response._resource_closers.append(request.close)
        if response.status_code >= 500:
            await sync_to_async(log_response, thread_sensitive=False)(
                "%s: %s", response.reason_phrase, request.path, response=response, request=request
            )
        return response

    def load_middleware(self, is_async: bool = False) -> None:
        self._view_middleware = []
        self._template_response_middleware = []
        self._exception_middleware = []
        self._middleware_chain = convert_exception_to_response(self._get_response_async)

    async def handle(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        try:
            body_file = await self.read_body(receive)
        except RequestAborted:
            return
        set_script_prefix(get_script_prefix(scope))
        request, response = self.create_request(scope, body_file)
        if request is not None:
            try:
                request.get_host()  # ALLOWED_HOSTS, as CommonMiddleware would check
            except DisallowedHost:
                from a2a.face.rest import error_response

                request, response = None, error_response(InvalidRequest("Invalid Host header."))
        if request is None:
            await self.send_response(response, send)
            body_file.close()
            return

        # Resolve against the face's own routes only (they are all these paths can match).
        request.urlconf = "a2a.face.urls"

        async def respond() -> HttpResponse:
            response = await self.get_response_async(request)
            for name, value in SECURITY_HEADERS.items():
                response.headers.setdefault(name, value)
            with contextlib.suppress(asyncio.CancelledError):
                await self.send_response(response, send)
            return response

        # Like Django: a client that goes away cancels the view (an SSE stream ends).
        tasks = [
            asyncio.create_task(self.listen_for_disconnect(receive)),
            asyncio.create_task(respond()),
        ]
        await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
        for task in tasks:
            if not task.done():
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
            else:
                with contextlib.suppress(RequestAborted):
                    task.result()
        if not tasks[1].cancelled() and tasks[1].exception() is None:
            _close(tasks[1].result())
        body_file.close()


def _close(response: HttpResponse) -> None:
    """Release the response's resources without sending request_finished."""
    for closer in response._resource_closers:
        with contextlib.suppress(Exception):
            closer()
    response._resource_closers.clear()
    response.closed = True


def with_face(app: ASGIApp) -> ASGIApp:
    """``app`` for everything but the A2A face's paths, which take the lean handler."""
    if not getattr(settings, "A2A_FACE_LEAN_HANDLER", True):
        return app
    face = FaceASGIHandler()

    async def router(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http" and is_face_path(scope.get("path", "")):
            await face(scope, receive, send)
        else:
            await app(scope, receive, send)

    return router
