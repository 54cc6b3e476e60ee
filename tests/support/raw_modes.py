"""The test agent's non-A2A behaviours: ASGI middleware serving ``/x/{mode}/...``.

See :mod:`tests.support.agents` for the modes. Every request is counted on the
:class:`~tests.support.agents.TestAgent` before it is answered.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

if TYPE_CHECKING:
    from tests.support.agents import TestAgent


# The size of the ``huge`` answer, and the most ``endless`` sends before it gives up.
HUGE_BYTES = 2_000_000
ENDLESS_BYTES = 200_000_000


async def _endless() -> AsyncIterator[bytes]:
    yield b'{"task": {"id": "endless", "pad": "'
    chunk = b"x" * 65536
    for _ in range(ENDLESS_BYTES // len(chunk)):
        yield chunk


async def whole_body(receive: Receive) -> bytes:
    """A request's whole body, however many messages it came in."""
    body = b""
    while True:
        chunk = await receive()
        body += chunk.get("body", b"")
        if not chunk.get("more_body"):
            return body


class RawModes:
    """ASGI middleware serving ``/x/{mode}/...``: non-A2A answers, or faults in front of A2A."""

    def __init__(self, app: ASGIApp, agent: TestAgent, *, output: dict[str, Any]) -> None:
        """``output`` is what the ``legacy`` mode's finished tasks carry."""
        self.app = app
        self.agent = agent
        self.output = output
        self.seen: set[str] = set()
        self.legacy: dict[str, int] = {}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path: str = scope["path"]
        if path == "/_stats":  # for benchmarks in another process; not counted
            await JSONResponse({"counts": dict(self.agent.counts)})(scope, receive, send)
            return
        self.agent.count(path)
        self.agent.record_headers(path, scope.get("headers") or [])
        if not path.startswith("/x/"):
            await self.app(scope, receive, send)
            return
        _, _, rest = path.partition("/x/")
        mode, _, tail = rest.partition("/")
        tail = "/" + tail
        response: Response | None = None
        if mode == "500":
            response = JSONResponse({"error": "internal"}, status_code=500)
        elif mode == "html":
            response = Response(
                "<html><body>Welcome to nginx</body></html>", media_type="text/html"
            )
        elif mode == "garbage":
            response = Response("{not json at all", media_type="application/json")
        elif mode == "wrongshape":
            response = JSONResponse({"status": "ok", "items": [1, 2, 3]})
        elif mode == "hang":
            await self.agent.stopping.wait()
            response = Response("", status_code=503)
        elif mode == "huge":  # a declared length over any sane cap
            pad = "x" * HUGE_BYTES
            response = JSONResponse({"task": {"id": "huge", "pad": pad}})
        elif mode == "endless":  # no declared length: chunks until the client hangs up
            response = StreamingResponse(_endless(), media_type="application/json")
        elif mode == "legacy":
            response = await self._legacy(tail, receive)
        elif mode in ("nolist", "badlist", "busylist") and tail == "/tasks":
            # ListTasks (GET /tasks) not served, answered with a non-Task, or busy; the
            # rest of the agent works (under the same prefix).
            if mode == "nolist":
                response = Response("Not Found", status_code=404, media_type="text/plain")
            elif mode == "badlist":
                response = JSONResponse({"tasks": [{"nope": 1}], "nextPageToken": ""})
            else:
                response = JSONResponse({}, status_code=503, headers={"Retry-After": "7"})
        elif mode in ("nolist", "badlist", "busylist"):
            scope = {**scope, "path": tail, "raw_path": tail.encode()}
            await self.app(scope, receive, send)
            return
        elif mode in ("flaky", "busy"):
            key = f"{mode}:{scope['method']}:{tail}"
            if key not in self.seen:
                self.seen.add(key)
                if mode == "busy":
                    response = JSONResponse({}, status_code=429, headers={"Retry-After": "1"})
                else:
                    response = JSONResponse({"error": "unavailable"}, status_code=503)
            else:
                scope = {**scope, "path": tail, "raw_path": tail.encode()}
                await self.app(scope, receive, send)
                return
        else:
            response = JSONResponse({"error": f"unknown mode {mode}"}, status_code=404)
        await response(scope, receive, send)

    async def _legacy(self, tail: str, receive: Receive) -> Response:
        """An A2A 0.3-style agent: lowercase states, ``kind`` everywhere, unknown fields."""
        if tail.endswith("message:send"):
            body = await whole_body(receive)
            message = json.loads(body or b"{}").get("message", {})
            task_id = str(uuid.uuid4())
            self.legacy[task_id] = 0
            task = {
                "kind": "task",
                "id": task_id,
                "contextId": message.get("contextId") or str(uuid.uuid4()),
                "status": {"state": "submitted"},
                "vendorExtra": {"anything": True},
            }
            return JSONResponse({"task": task})
        task_id = tail.removeprefix("/tasks/").split(":")[0]
        if tail.endswith(":cancel"):
            return JSONResponse({"id": task_id, "status": {"state": "canceled"}, "kind": "task"})
        return JSONResponse(
            {
                "kind": "task",
                "id": task_id,
                "contextId": "legacy-context",
                "status": {"state": "completed", "timestamp": "2025-01-01T00:00:00Z"},
                "artifacts": [
                    {
                        "artifactId": "a1",
                        "parts": [{"kind": "data", "data": dict(self.output)}],
                        "unknownArtifactField": 1,
                    }
                ],
                "history": [],
                "someFutureField": "ignored",
            }
        )


class HoldsSends:
    """ASGI middleware: every ``POST .../message:send`` goes on with its
    ``configuration.returnImmediately`` turned off, so the SDK answers it only when the
    task ends or asks."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not scope["path"].endswith("/message:send"):
            await self.app(scope, receive, send)
            return
        body = await whole_body(receive)
        request = json.loads(body or b"{}")
        request.setdefault("configuration", {})["returnImmediately"] = False
        held = json.dumps(request).encode()
        headers = [(k, v) for k, v in scope["headers"] if k.lower() != b"content-length"]
        headers.append((b"content-length", str(len(held)).encode()))
        sent = False

        async def replay() -> Message:
            nonlocal sent
            if sent:
                return await receive()
            sent = True
            return {"type": "http.request", "body": held, "more_body": False}

        await self.app({**scope, "headers": headers}, replay, send)
