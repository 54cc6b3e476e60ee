"""A scripted HTTP+JSON 1.0 agent for the answer-checking tests: each call is answered by
``agent.answer(kind)``, ``kind`` one of ``send`` (``message:send``), ``stream``
(``message:stream``), ``get`` (``GET /tasks/{id}``) or ``other``; a test sets it to
answer garbage where it wants some. Also the worker run and the registration those
tests share."""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import AsyncIterator, Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from django.utils import timezone
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from a2a import services, worker
from a2a.models import Task
from tests.support.serving import free_port, serve_agent

COMPLETED, WORKING, SUBMITTED = "TASK_STATE_COMPLETED", "TASK_STATE_WORKING", "TASK_STATE_SUBMITTED"
GOOD_ARTIFACT = {"artifactId": "a", "parts": [{"data": {"verdict": "pass"}}]}


def refused(kind: str = "") -> Response:
    """What the agent answers a call it has no script for."""
    return Response(status_code=405)


@dataclass
class ScriptedAgent:
    """The agent's address and script (see the module docstring)."""

    host: str = "127.0.0.1"
    port: int = 0
    answer: Callable[[str], Response] = refused
    stopping: asyncio.Event = field(default_factory=asyncio.Event)

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"


def _kind(path: str) -> str:
    for end, kind in (("/message:send", "send"), ("/message:stream", "stream")):
        if path.endswith(end):
            return kind
    return "get" if "/tasks/" in path and ":" not in path.rsplit("/", 1)[-1] else "other"


def _app(agent: ScriptedAgent) -> ASGIApp:
    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        await Request(scope, receive).body()
        await agent.answer(_kind(scope["path"]))(scope, receive, send)

    return app


@contextlib.contextmanager
def run_scripted_agent() -> Iterator[ScriptedAgent]:
    """Serve a :class:`ScriptedAgent` in a background thread."""
    agent = ScriptedAgent(port=free_port())
    with serve_agent(agent, _app(agent)):
        yield agent


def register(make_agent: Any, make_skill: Any, agent: ScriptedAgent, *, stream: bool) -> Any:
    """Register ``agent`` for ``ce-review``: HTTP+JSON 1.0, followed by streams (which it
    answers; no polls) or by polls."""
    return make_agent(
        skills=[make_skill(id="ce-review")],
        a2a_endpoint=agent.url,
        polling=not stream,
        streaming=stream,
        card_read_at=timezone.now(),
        protocol_binding="HTTP+JSON",
        protocol_version="1.0",
    )


def task_answer(state: str, message: Any = None, **extra: Any) -> JSONResponse:
    """A send or get answer: the agent's task ``t1`` in ``state`` (with its status
    ``message``, when given)."""
    status = {"state": state, **({"message": message} if message is not None else {})}
    return JSONResponse({"task": {"id": "t1", "contextId": "c", "status": status, **extra}})


def sse_stream(events: Iterable[Any]) -> StreamingResponse:
    """A ``message:stream`` answer sending ``events``, each a server-sent event of its own."""

    async def chunks() -> AsyncIterator[bytes]:
        for event in events:
            yield b"data: " + json.dumps(event).encode() + b"\n\n"
            await asyncio.sleep(0)

    return StreamingResponse(chunks(), media_type="text/event-stream")


def run_out(user: Any, timeout: float = 15.0) -> Task:
    """Create a task and run the worker on it in this thread while it has an action (made
    due now: the test does not wait out intervals); the task once it has none."""
    task = services.create_task(skill_id="ce-review", input={"product": "lamp"}, user=user)
    deadline = time.monotonic() + timeout
    while True:
        task.refresh_from_db()
        if not task.next_action:
            return task
        if time.monotonic() > deadline:
            raise AssertionError(f"task still {task.state}: {task.error} {task.metadata}")
        Task.objects.filter(pk=task.pk).update(next_poll_at=timezone.now(), lease_until=None)
        worker.process_task(task.pk)
