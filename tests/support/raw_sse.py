"""A scriptable HTTP+JSON 1.0 agent for byte-level stream cases: ``message:stream`` and
``GET /tasks/{id}:subscribe`` send exactly the chunks a test sets, and it cannot be
polled (``GET /tasks/{id}`` is 405), so the platform follows its tasks by streams.

``agent.stream`` and ``agent.subscribe`` are callables giving the chunks (``subscribe``
None: a subscribe is refused as an ended task's is, 400 ``UNSUPPORTED_OPERATION``;
``agent.busy_for`` set: a subscribe is answered 503 with that ``Retry-After``);
``agent.counts`` counts the calls (``"stream"``, ``"subscribe"``, ``"other"``), and
``agent.subscribed`` lists the task ids subscribed to.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections import Counter
from collections.abc import AsyncIterator, Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from django.utils import timezone
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from tests.support.serving import free_port, serve_agent

Chunks = Callable[[], Iterable[bytes]]

REFUSED = {
    "error": {
        "code": 400,
        "status": "FAILED_PRECONDITION",
        "message": "the task is in a terminal state",
        "details": [
            {
                "@type": "type.googleapis.com/google.rpc.ErrorInfo",
                "reason": "UNSUPPORTED_OPERATION",
                "domain": "a2a-protocol.org",
            }
        ],
    }
}


def _nothing() -> Iterable[bytes]:
    return []


@dataclass
class RawStreamAgent:
    """The agent's address and script (see the module docstring)."""

    host: str = "127.0.0.1"
    port: int = 0
    stream: Chunks = _nothing
    subscribe: Chunks | None = None
    busy_for: int = 0
    stream_type: str = "text/event-stream"
    counts: Counter[str] = field(default_factory=Counter)
    subscribed: list[str] = field(default_factory=list)

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"


def sse(obj: Any, event: str | None = None) -> bytes:
    """One whole server-sent event carrying ``obj`` as JSON (named ``event``, if given)."""
    head = f"event: {event}\n".encode() if event else b""
    return head + b"data: " + json.dumps(obj).encode() + b"\n\n"


def task_event(task_id: str, state: str, **extra: Any) -> dict[str, Any]:
    """A StreamResponse carrying a whole Task."""
    return {"task": {"id": task_id, "contextId": "ctx", "status": {"state": state}, **extra}}


def status_event(task_id: str, state: str, **status: Any) -> dict[str, Any]:
    """A StreamResponse carrying a TaskStatusUpdateEvent."""
    update = {"taskId": task_id, "contextId": "ctx", "status": {"state": state, **status}}
    return {"statusUpdate": update}


def build(agent: RawStreamAgent) -> ASGIApp:
    """The agent's ASGI app."""

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        request = Request(scope, receive)
        await request.body()
        path: str = scope["path"]
        response: Response
        if path.endswith("/message:stream"):
            agent.counts["stream"] += 1
            response = StreamingResponse(_chunks(agent.stream()), media_type=agent.stream_type)
        elif path.endswith(":subscribe"):
            agent.counts["subscribe"] += 1
            agent.subscribed.append(path.rsplit("/", 1)[-1].rsplit(":", 1)[0])
            if agent.busy_for:
                busy = {"error": {"code": 503, "status": "UNAVAILABLE", "message": "busy"}}
                headers = {"Retry-After": str(agent.busy_for)}
                response = JSONResponse(busy, status_code=503, headers=headers)
            elif agent.subscribe is None:
                response = JSONResponse(REFUSED, status_code=400)
            else:
                response = StreamingResponse(
                    _chunks(agent.subscribe()), media_type="text/event-stream"
                )
        else:
            agent.counts["other"] += 1
            response = Response("not here", status_code=405)
        await response(scope, receive, send)

    return app


async def _chunks(chunks: Iterable[bytes]) -> AsyncIterator[bytes]:
    for chunk in chunks:
        yield chunk
        await asyncio.sleep(0)  # each its own write


@contextlib.contextmanager
def run_raw_stream_agent() -> Iterator[RawStreamAgent]:
    """Serve a :class:`RawStreamAgent` in a background thread."""
    agent = RawStreamAgent(port=free_port())
    with serve_agent(agent, build(agent)):
        yield agent


def register(make_agent: Any, skill: Any, agent: RawStreamAgent) -> Any:
    """Register the raw agent for ``skill``: HTTP+JSON 1.0, streams, cannot be polled."""
    return make_agent(
        skills=[skill],
        a2a_endpoint=agent.url,
        polling=False,
        streaming=True,
        card_read_at=timezone.now(),
        protocol_binding="HTTP+JSON",
        protocol_version="1.0",
    )
