"""A lean ASGI entry for the A2A face.

The face's views authenticate, parse and render themselves; Django's middleware stack
(sessions, CSRF, messages, ...) adds nothing to them but, under ASGI, costs two thread hops
per synchronous middleware per request. This handler serves ``/v1/a2a/...`` and
``/.well-known/agent-card.json`` with the same URLconf and views, without the middleware
and the request signals (the face tidies database connections itself, see
:mod:`a2a.face.db`). Everything else goes to the normal Django application. What it shares
with the tasks API's lean path lives in :mod:`platform_site.lean_asgi`.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import logging
import re
from typing import Any

from asgiref.sync import sync_to_async
from django.conf import settings
from django.core.exceptions import DisallowedHost, RequestAborted, SuspiciousOperation
from django.core.handlers.asgi import get_script_prefix
from django.http import HttpRequest, HttpResponse
from django.urls import set_script_prefix, set_urlconf
from django.utils.log import log_response

from a2a.face.errors import FaceError, InvalidRequest, PayloadTooLarge
from platform_site import tracing
from platform_site.lean_asgi import ASGIApp, LeanASGIHandler, release, route_to
from platform_site.shielded import to_the_end

log = logging.getLogger(__name__)

FACE_PREFIXES = ("/v1/a2a/", "/.well-known/agent-card.json")


def is_face_path(path: str) -> bool:
    return path == "/v1/a2a" or path.startswith(FACE_PREFIXES)


class FaceASGIHandler(LeanASGIHandler):
    """The lean handler for the face's async views, without request signals.

    The views await their ORM work on a2a.face.db's pool; a client that goes away cancels
    the view, and a bad Host gets the face's A2A error shape.
    """

    async_views = True

    def bad_host_response(self, request: HttpRequest, exc: DisallowedHost) -> HttpResponse:
        return _error_for_path(
            request.path, request.method or "", InvalidRequest("Invalid Host header.")
        )

    def create_request(self, scope: dict[str, Any], body_file: Any) -> Any:
        """Django's, but a request it cannot build (a query string that is not UTF-8, a
        body over the limit) is answered in the face's shape, not as HTML or text."""
        request, response = super().create_request(scope, body_file)
        if request is None:
            error: FaceError = (
                PayloadTooLarge()
                if response.status_code == 413
                else InvalidRequest("The request could not be read: it is not valid UTF-8.")
            )
            response = _error_for_path(scope.get("path", ""), scope.get("method", ""), error)
        return request, response

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

    async def handle(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if not tracing.enabled():
            await self._handle(scope, receive, send)
            return
        # Django's middleware is skipped, and its instrumentation with it: the caller's
        # traceparent is read here, and the tasks the request creates link to its trace.
        with tracing.server_span(scope, "/v1/a2a"):
            await self._handle(scope, receive, send)

    async def _handle(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        try:
            body_file = await self.read_body(receive)
        except RequestAborted:
            return
        set_script_prefix(get_script_prefix(scope))
        request, response = self.create_request(scope, body_file)
        if request is not None and (refused := self.check_host(request)) is not None:
            request, response = None, refused
        if request is None:
            await self.send_response(response, send)
            body_file.close()
            return

        # Resolve against the face's own routes only (they are all these paths can match).
        request.urlconf = "a2a.face.urls"

        async def respond() -> HttpResponse:
            response = self.add_security_headers(request, await self.get_response_async(request))
            with contextlib.suppress(asyncio.CancelledError):
                await self.send_response(response, send)
            return response

        rpc = speaks_jsonrpc(request.path, request.method or "")
        if not may_stream(request.path, _body_of(request) if rpc else None, rpc=rpc):
            # One answer, at once: the client going away changes nothing (the answer to a
            # closed connection is dropped), so no watch (two asyncio tasks per request).
            try:
                release(await respond())
            finally:
                body_file.close()
            return
        # Like Django: a client that goes away cancels the view (an SSE stream ends).
        tasks = [
            asyncio.create_task(self.listen_for_disconnect(receive)),
            asyncio.create_task(respond()),
        ]
        try:
            await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
        except asyncio.CancelledError:
            # This handler cancelled itself (daphne's shutdown, or its kill of a handler
            # that outlived its client): asyncio.wait passes no cancel on, and the view's
            # task streamed on orphaned, its subscription open (with Redis, its channel in
            # the task's group until group_expiry, seven days). To its end: daphne cancels
            # again every second (platform_site.shielded).
            await to_the_end(_end(tasks, body_file))
            raise
        await _end(tasks, body_file)  # (no task of its own on the ordinary path)
        for task in tasks:
            if task.done() and not task.cancelled():
                with contextlib.suppress(RequestAborted):
                    task.result()


# How long a handler waits for its view's task to end once cancelled: a stream's
# subscription closes within CLOSE_WAIT (2 s) and a couple of Redis round trips.
END_WAIT = 5.0


async def _end(tasks: list[asyncio.Task[Any]], body_file: Any) -> None:
    """Cancel the watch and the view's task (``tasks``) if still running, wait (at most
    :data:`END_WAIT`) for them to end, then release the answer and the request's body."""
    running = {task for task in tasks if not task.done()}
    for task in running:
        task.cancel()
    if running:
        # asyncio.wait, not await: a task's clean-up is not cut by a cancel of this wait.
        _, late = await asyncio.wait(running, timeout=END_WAIT)
        if late:
            log.warning("a face request's view did not end %s s after its cancel", END_WAIT)
    respond = tasks[1]
    if respond.done() and not respond.cancelled() and respond.exception() is None:
        release(respond.result())
    body_file.close()


# The HTTP+JSON interface's own URL, default or an agent's (not the face's `tasks`): it
# has no HTTP+JSON operation of its own, and takes JSON-RPC posts (a2a/face/urls.py).
_INTERFACE_URL = re.compile(r"^/v1/a2a(?:/(?!tasks/?$)[a-z0-9](?:[a-z0-9_-]{0,98}[a-z0-9])?)?/?$")


def speaks_jsonrpc(path: str, method: str) -> bool:
    """Whether a request to ``path`` is a JSON-RPC call: under the JSON-RPC URL, or a POST
    to the HTTP+JSON interface's own URL, where clients given only that URL post JSON-RPC
    (Microsoft Agent Framework's ``A2AAgent(url=...)``)."""
    return "/jsonrpc" in path or (method == "POST" and _INTERFACE_URL.match(path) is not None)


def may_stream(path: str, body: bytes | None = None, *, rpc: bool | None = None) -> bool:
    """Whether the answer to ``path`` (and, for JSON-RPC, ``body``) can be a stream, which
    must end when its client goes away: the REST streaming operations, and a JSON-RPC call
    whose method streams (or whose method cannot be read here: the view will say why).
    ``rpc``: whether the request is a JSON-RPC call (default: under the JSON-RPC URL)."""
    if path.endswith((":stream", ":subscribe")):
        return True
    if not (rpc if rpc is not None else "/jsonrpc" in path):
        return False
    method = _jsonrpc_method(body)
    return method is None or method in _streaming_methods()


def _body_of(request: HttpRequest) -> bytes | None:
    """The body, or None when it cannot be read here (over the size limit, a broken
    upload): the view answers that, and the watch stays."""
    try:
        return request.body
    except (SuspiciousOperation, OSError):
        return None


# Bodies up to this size are read for their method; a larger one keeps the watch, since
# parsing it twice (here and in the view) would cost more than the watch (75 us).
_PEEK_BYTES = 16 * 1024


def _jsonrpc_method(body: bytes | None) -> str | None:
    if body is None or len(body) > _PEEK_BYTES:
        return None
    try:
        call = json.loads(body)
    except (ValueError, RecursionError):  # not JSON, too deep, not UTF-8
        return None
    method = call.get("method") if isinstance(call, dict) else None
    return method if isinstance(method, str) else None


@functools.cache
def _streaming_methods() -> frozenset[str]:
    """The JSON-RPC methods that answer with a stream, 1.0 and 0.3 (read lazily: the
    bindings pull in the views and models)."""
    from a2a.face import jsonrpc, legacy

    names = {name for name, (_, streams) in jsonrpc.METHODS.items() if streams}
    names |= {name for name, (_, streams, _) in legacy.METHODS.items() if streams}
    return frozenset(names)


def _error_for_path(path: str, method: str, error: FaceError) -> HttpResponse:
    """``error`` as the binding of the request answers: a JSON-RPC envelope for a JSON-RPC
    call (:func:`speaks_jsonrpc`), the HTTP+JSON error for anything else."""
    # Lazily: the bindings pull in the views and models.
    if speaks_jsonrpc(path, method):
        from a2a.face import jsonrpc

        return jsonrpc.error_response(error)
    from a2a.face import rest

    return rest.error_response(error)


def with_face(app: ASGIApp) -> ASGIApp:
    """``app`` for everything but the A2A face's paths, which take the lean handler."""
    if not getattr(settings, "A2A_FACE_LEAN_HANDLER", True):
        return app
    return route_to(FaceASGIHandler(), lambda scope: is_face_path(scope.get("path", "")), app)
