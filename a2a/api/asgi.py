"""A lean ASGI path for token-authenticated calls to the tasks API.

Under ASGI, Django runs each synchronous middleware with two thread hops and gives every
request a fresh sync thread (``ThreadSensitiveContext``), hence a fresh database
connection. A request to ``/api/tasks...`` carrying ``Authorization: Bearer`` needs none
of the middleware (no session, no CSRF: DRF authenticates the token itself), so it takes
this handler: same URLconf, views, authentication and error shapes, no middleware chain,
and sync views on the one shared sync thread (whose connection is reused). Requests
without a Bearer token (a browser session) go through the normal application.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from django.conf import settings
from django.core.exceptions import DisallowedHost
from django.core.handlers.asgi import ASGIHandler
from django.core.handlers.exception import convert_exception_to_response, response_for_exception
from django.http import HttpRequest, HttpResponse

ASGIApp = Callable[[dict[str, Any], Any, Any], Awaitable[None]]
PREFIX = "/api/tasks"
# What SecurityMiddleware and XFrameOptionsMiddleware would add to an API answer.
HEADERS = {
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
    "X-Frame-Options": "DENY",
}


class BearerAPIHandler(ASGIHandler):
    """Django's ASGI handler without the middleware chain and the per-request thread."""

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        await self.handle(scope, receive, send)

    def load_middleware(self, is_async: bool = False) -> None:
        self._view_middleware = []
        self._template_response_middleware = []
        self._exception_middleware = []
        self._middleware_chain = convert_exception_to_response(self._get_response_async)

    async def get_response_async(self, request: HttpRequest) -> HttpResponse:
        try:
            request.get_host()  # ALLOWED_HOSTS, as CommonMiddleware checks it
        except DisallowedHost as exc:
            return response_for_exception(request, exc)  # 400, logged as Django does
        response = await super().get_response_async(request)
        for name, value in HEADERS.items():
            response.headers.setdefault(name, value)
        return response


def _has_bearer(scope: dict[str, Any]) -> bool:
    for name, value in scope.get("headers") or []:
        if name == b"authorization":
            return value[:7].lower() == b"bearer "
    return False


def with_tasks_api(app: ASGIApp) -> ASGIApp:
    """``app``, except Bearer calls under ``/api/tasks`` which take the lean handler."""
    if not getattr(settings, "TASKS_API_LEAN_HANDLER", True):
        return app
    lean = BearerAPIHandler()

    async def router(scope: dict[str, Any], receive: Any, send: Any) -> None:
        path = scope.get("path", "") if scope["type"] == "http" else ""
        if path.startswith(PREFIX) and _has_bearer(scope):
            await lean(scope, receive, send)
        else:
            await app(scope, receive, send)

    return router
