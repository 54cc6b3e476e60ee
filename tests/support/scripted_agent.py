"""A scripted A2A 1.0 agent on loopback, for the tests of what the platform makes of an
agent's answers: each call is answered by ``agent.answer(kind, body)``, the test setting
it to answer garbage where it wants some.

``kind`` is the JSON-RPC method on JSON-RPC (``SendMessage``, ``SendStreamingMessage``,
``CancelTask``…) and on HTTP+JSON ``send`` (``message:send``), ``stream``
(``message:stream``), ``get`` (``GET /tasks/{id}``), ``cancel``, ``subscribe`` or
``other`` (a listing, say); ``body`` is the call's JSON (``None`` if it had none). Also
its registration for ``ce-review``, the answers tests build for it, and the worker run
that has it answer a task.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections import Counter
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from django.utils import timezone
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from a2a import creation, worker
from a2a.models import Task
from tests.support.serving import free_port, serve_agent

COMPLETED, WORKING, SUBMITTED = "TASK_STATE_COMPLETED", "TASK_STATE_WORKING", "TASK_STATE_SUBMITTED"


def refused(kind: str = "", body: Any = None) -> Response:
    """What the agent answers a call it has no script for."""
    return Response(status_code=405)


@dataclass
class ScriptedAgent:
    """The agent's address and script (see the module docstring); ``calls`` counts the
    calls of each kind."""

    host: str = "127.0.0.1"
    port: int = 0
    answer: Callable[[str, Any], Response] = refused
    calls: Counter[str] = field(default_factory=Counter)
    stopping: asyncio.Event = field(default_factory=asyncio.Event)

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"


_SUFFIXES = (
    ("/message:send", "send"),
    ("/message:stream", "stream"),
    (":cancel", "cancel"),
    (":subscribe", "subscribe"),
)


def _kind(path: str, body: Any) -> str:
    if isinstance(body, dict) and "jsonrpc" in body:
        return str(body.get("method"))
    for suffix, kind in _SUFFIXES:
        if path.endswith(suffix):
            return kind
    # GET /tasks/{id}; a listing (GET /tasks) is not a poll of one task.
    return "get" if "/tasks/" in path and ":" not in path.rsplit("/", 1)[-1] else "other"


def _app(agent: ScriptedAgent) -> ASGIApp:
    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        raw = await Request(scope, receive).body()
        body = json.loads(raw) if raw else None
        kind = _kind(scope["path"], body)
        agent.calls[kind] += 1
        await agent.answer(kind, body)(scope, receive, send)

    return app


@contextlib.contextmanager
def run_scripted_agent() -> Iterator[ScriptedAgent]:
    """Serve a :class:`ScriptedAgent` in a background thread (registered by nobody yet)."""
    agent = ScriptedAgent(port=free_port())
    with serve_agent(agent, _app(agent)):
        yield agent


def register(
    make_agent: Any,
    make_skill: Any,
    agent: ScriptedAgent,
    binding: str = "HTTP+JSON",
    *,
    stream: bool = False,
    **fields: Any,
) -> Any:
    """Register ``agent`` for ``ce-review`` on ``binding`` (1.0), followed by streams
    (which it answers; no polls) when ``stream``, else by polls; more of its profile's
    ``fields`` as given."""
    if stream:
        fields = {"polling": False, "streaming": True, **fields}
    return make_agent(
        skills=[make_skill(id="ce-review")],
        a2a_endpoint=agent.url,
        card_read_at=timezone.now(),
        protocol_binding=binding,
        protocol_version="1.0",
        **fields,
    )


@contextlib.contextmanager
def scripted_agent(
    make_agent: Any, make_skill: Any, binding: str, **fields: Any
) -> Iterator[ScriptedAgent]:
    """A :class:`ScriptedAgent`, served and registered (see :func:`register`)."""
    with run_scripted_agent() as agent:
        register(make_agent, make_skill, agent, binding, **fields)
        yield agent


# --- its answers ------------------------------------------------------------------------------


def task_answer(state: str, message: Any = None, **extra: Any) -> JSONResponse:
    """A send or get answer: the agent's task ``t1`` in ``state`` (with its status
    ``message``, when given)."""
    status = {"state": state, **({"message": message} if message is not None else {})}
    return JSONResponse({"task": {"id": "t1", "contextId": "c", "status": status, **extra}})


def events(*objects: dict[str, Any], rpc_id: str | None = None) -> StreamingResponse:
    """A stream answer sending ``objects``, each a server-sent event of its own (each a
    JSON-RPC result for ``rpc_id`` when given)."""

    async def chunks() -> AsyncIterator[bytes]:
        for obj in objects:
            data = obj if rpc_id is None else {"jsonrpc": "2.0", "id": rpc_id, "result": obj}
            yield b"data: " + json.dumps(data).encode() + b"\n\n"
            await asyncio.sleep(0)  # each its own write

    return StreamingResponse(chunks(), media_type="text/event-stream")


# --- a task it answers ------------------------------------------------------------------------


def start(user: Any) -> Task:
    """A ``ce-review`` task of ``user``'s."""
    return creation.create_task(skill_id="ce-review", input={"product": "lamp"}, user=user)


def run_out(task: Task, timeout: float = 15.0) -> Task:
    """Run the worker on ``task`` in this thread while it has an action (made due now: the
    test does not wait out intervals); the task once it has none."""
    deadline = time.monotonic() + timeout
    while True:
        task.refresh_from_db()
        if not task.next_action:
            return task
        if time.monotonic() > deadline:
            raise AssertionError(f"task still {task.state}: {task.error} {task.metadata}")
        Task.objects.filter(pk=task.pk).update(next_poll_at=timezone.now(), lease_until=None)
        worker.process_task(task.pk)
