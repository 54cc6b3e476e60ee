"""A lean ASGI path for token-authenticated calls to the tasks API.

A request to ``/api/tasks...`` carrying ``Authorization: Bearer`` needs none of Django's
middleware (no session, no CSRF: DRF authenticates the token itself), so it takes this
handler (see :mod:`platform_site.lean_asgi`): same URLconf, views, authentication and error
shapes, no middleware chain and no request signals. The views run on a small pool of threads
(``TASKS_API_THREADS``, :mod:`platform_site.dbthreads`), each keeping its database
connection, so one request's database round trips do not hold up the others (``0``: on
asgiref's one shared sync thread). Requests without a Bearer token (a browser session) go
through the normal application.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.exceptions import RequestAborted
from django.core.handlers.asgi import get_script_prefix
from django.core.handlers.exception import response_for_exception
from django.http import HttpRequest, HttpResponse
from django.urls import set_script_prefix

from platform_site import tracing
from platform_site.dbthreads import ConnectionPool
from platform_site.lean_asgi import ASGIApp, LeanASGIHandler, release, route_to
from platform_site.middleware import bad_text_response

PREFIX = "/api/tasks"

pool = ConnectionPool("tasks-api", "TASKS_API_THREADS")
close_pool = pool.close


class BearerAPIHandler(LeanASGIHandler):
    """The lean handler running each (synchronous) view wholly on one pool thread."""

    def _respond(self, request: HttpRequest) -> HttpResponse:
        # What the skipped middleware would refuse: a bad Host, a NUL in the path or query.
        try:
            refused = self.check_host(request) or bad_text_response(request)
        except Exception as exc:  # e.g. TooManyFieldsSent reading the query: Django's 400
            refused = response_for_exception(request, exc)
        response = refused or self.get_response(request)
        # DRF's responses render lazily; render on the pool thread, not the event loop.
        if hasattr(response, "render") and not getattr(response, "is_rendered", True):
            response.render()
        return self.add_security_headers(request, response)

    async def get_response_async(self, request: HttpRequest) -> HttpResponse:
        return await pool.call(self._respond)(request)

    async def handle(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        """Django's request cycle minus what these views do not need: the request signals
        and the watch for a client going away.

        The signals' receivers tidy the database connections of the thread they run on,
        one thread hop each way per request; the pools' threads tidy their own
        (:func:`platform_site.dbthreads.tidy_connections`). A synchronous view cannot be
        stopped when its client goes away, so watching for it (two more asyncio tasks per
        request) changes nothing: the answer to a closed connection is dropped. (No view
        here streams; a streaming answer would need the watch, as the face keeps it.)

        With tracing on, the request is a SERVER span in the caller's trace (Django's
        instrumentation, a middleware, is skipped too): the tasks it creates link to it.
        """
        if not tracing.enabled():
            await self._handle(scope, receive, send)
            return
        with tracing.server_span(scope, "/api/tasks"):
            await self._handle(scope, receive, send)

    async def _handle(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        try:
            body_file = await self.read_body(receive)
        except RequestAborted:
            return
        try:
            set_script_prefix(get_script_prefix(scope))
            request, response = self.create_request(scope, body_file)
            if request is not None:
                response = await self.get_response_async(request)
            await self.send_response(response, send)
            release(response)
        finally:
            body_file.close()


def _is_bearer_api_call(scope: dict[str, Any]) -> bool:
    if not scope.get("path", "").startswith(PREFIX):
        return False
    for name, value in scope.get("headers") or []:
        if name == b"authorization":
            return value[:7].lower() == b"bearer "
    return False


def with_tasks_api(app: ASGIApp) -> ASGIApp:
    """``app``, except Bearer calls under ``/api/tasks`` which take the lean handler."""
    if not getattr(settings, "TASKS_API_LEAN_HANDLER", True):
        return app
    return route_to(BearerAPIHandler(), _is_bearer_api_call, app)
