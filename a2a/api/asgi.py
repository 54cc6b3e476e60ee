"""A lean ASGI path for token-authenticated calls to the tasks API.

Under ASGI, Django runs each synchronous middleware with two thread hops and gives every
request a fresh sync thread (``ThreadSensitiveContext``), hence a fresh database
connection. A request to ``/api/tasks...`` carrying ``Authorization: Bearer`` needs none
of the middleware (no session, no CSRF: DRF authenticates the token itself), so it takes
this handler: same URLconf, views, authentication and error shapes, no middleware chain.
The views run on a small pool of threads (``TASKS_API_THREADS``), each keeping its
database connection, so one request's database round trips do not hold up the others
(``0``: on asgiref's one shared sync thread). Requests without a Bearer token (a browser
session) go through the normal application.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor, wait
from typing import Any

from asgiref.sync import sync_to_async
from django.conf import settings
from django.core.exceptions import DisallowedHost
from django.core.handlers.asgi import ASGIHandler
from django.core.handlers.exception import convert_exception_to_response, response_for_exception
from django.db import connections
from django.http import HttpRequest, HttpResponse

ASGIApp = Callable[[dict[str, Any], Any, Any], Awaitable[None]]
PREFIX = "/api/tasks"
# What SecurityMiddleware and XFrameOptionsMiddleware would add to an API answer.
HEADERS = {
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
    "X-Frame-Options": "DENY",
}


_pool: ThreadPoolExecutor | None = None
_pool_lock = threading.Lock()


def _executor() -> ThreadPoolExecutor | None:
    global _pool
    if settings.TASKS_API_THREADS <= 0:
        return None
    with _pool_lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(settings.TASKS_API_THREADS, thread_name_prefix="tasks-api")
        return _pool


def close_pool() -> None:
    """Close the pool threads' database connections and stop the pool (tests, shutdown)."""
    global _pool
    with _pool_lock:
        pool, _pool = _pool, None
    if pool is None:
        return
    size = pool._max_workers
    barrier = threading.Barrier(size)

    def close() -> None:
        connections.close_all()
        barrier.wait(timeout=10)  # one call per thread: each closes its own connections

    wait([pool.submit(close) for _ in range(size)])
    pool.shutdown()


def _tidy_connections() -> None:
    """Drop this thread's connections that broke or outlived CONN_MAX_AGE."""
    for conn in connections.all(initialized_only=True):
        if conn.connection is None or conn.in_atomic_block:
            continue
        max_age = conn.settings_dict.get("CONN_MAX_AGE")
        expired = bool(max_age) and conn.close_at is not None and time.monotonic() >= conn.close_at
        if expired or (conn.errors_occurred and not conn.is_usable()):
            conn.close()


class BearerAPIHandler(ASGIHandler):
    """Django's ASGI handler without the middleware chain and the per-request thread."""

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        await self.handle(scope, receive, send)

    def load_middleware(self, is_async: bool = False) -> None:
        self._view_middleware = []
        self._template_response_middleware = []
        self._exception_middleware = []
        # The synchronous chain: a view runs wholly on one pool thread.
        self._middleware_chain = convert_exception_to_response(self._get_response)

    def _respond(self, request: HttpRequest) -> HttpResponse:
        _tidy_connections()
        try:
            request.get_host()  # ALLOWED_HOSTS, as CommonMiddleware checks it
        except DisallowedHost as exc:
            return response_for_exception(request, exc)  # 400, logged as Django does
        response = self.get_response(request)
        if hasattr(response, "render") and not getattr(response, "is_rendered", True):
            response.render()
        for name, value in HEADERS.items():
            response.headers.setdefault(name, value)
        return response

    async def get_response_async(self, request: HttpRequest) -> HttpResponse:
        pool = _executor()
        if pool is None:
            return await sync_to_async(self._respond, thread_sensitive=True)(request)
        return await sync_to_async(self._respond, thread_sensitive=False, executor=pool)(request)


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
