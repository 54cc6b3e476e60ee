"""A benchmark agent whose tasks take a while: a2a-sdk, HTTP+JSON 1.0, optionally pushing.

    .venv/bin/python bench/long_agent.py PORT [--push] [--seconds 60]

Each task goes WORKING, waits ``input["seconds"]`` (default ``--seconds``), adds a data
artifact and completes. With ``--push`` the card offers push notifications and the SDK's
push sender posts every event to the webhook a send configured. The agent notes when it
ended each task (``time.time()`` just before the COMPLETED event), so a benchmark can
measure how late the platform noticed:

* ``GET /_stats`` → ``{"counts": {path kind: n}, "pushes": n, "pushFailures": n}``
* ``GET /_ended`` → ``{agent task id: end time}``
* ``GET /_pushed`` → ``{agent task id: when its COMPLETED push began}`` (the part of the
  notice delay spent at the agent: its queue of events and earlier pushes)
* ``GET /_seen`` → ``{agent task id: [when the first poll after its end arrived, when the
  poll before it arrived]}`` (a polled task's notice delay split: the wait for that poll,
  the gap between the two polls, and what the platform took after it)
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import httpx
import uvicorn
from a2a.helpers import get_data_parts
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes import create_agent_card_routes, create_rest_routes
from a2a.server.tasks import (
    BasePushNotificationSender,
    InMemoryPushNotificationConfigStore,
    InMemoryTaskStore,
    TaskUpdater,
)
from a2a.types import a2a_pb2 as pb
from starlette.applications import Starlette
from starlette.responses import JSONResponse
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

ENDED: dict[str, float] = {}
# When the push of each task's COMPLETED left the agent (its POST began): the part of the
# notice delay spent at the agent, before the platform sees anything.
COMPLETED_PUSHED: dict[str, float] = {}
COUNTS: Counter[str] = Counter()
# Polls by arrival (Unix time): each task's latest, and for an ended task the first poll
# after its end with the one before it.
LAST_POLL: dict[str, float] = {}
SEEN: dict[str, tuple[float, float | None]] = {}
PUSHES = {"sent": 0, "failed": 0}
# Per push: when it was asked for (Unix time), its wait for a slot and the platform's
# answer time (the POST itself), both in ms.
PUSH_TIMES: list[tuple[float, float, float]] = []


def _kind(path: str, method: str) -> str:
    if path.endswith("/message:send"):
        return "send"
    if path.endswith(":cancel"):
        return "cancel"
    if "/tasks/" in path and method == "GET":
        return "get"
    if path.endswith("/tasks") and method == "GET":
        return "list"
    return "other"


class Slow(AgentExecutor):
    def __init__(self, seconds: float) -> None:
        self.seconds = seconds

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        task_id = context.task_id or str(uuid.uuid4())
        context_id = context.context_id or str(uuid.uuid4())
        data: dict[str, Any] = {}
        if context.message is not None:
            for found in get_data_parts(list(context.message.parts)):
                if isinstance(found, dict):
                    data = found
                    break
        updater = TaskUpdater(event_queue, task_id, context_id)
        await event_queue.enqueue_event(
            pb.Task(
                id=task_id,
                context_id=context_id,
                status=pb.TaskStatus(state=pb.TaskState.TASK_STATE_SUBMITTED),
            )
        )
        await updater.start_work()
        await asyncio.sleep(float(data.get("seconds", self.seconds)))
        part = pb.Part()
        part.data.struct_value.update({"verdict": "pass"})
        await updater.add_artifact([part], name="result")
        ENDED[task_id] = time.time()
        await updater.complete()

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        await TaskUpdater(event_queue, context.task_id or "", context.context_id or "").cancel()


# Pushes in flight at once, and the push client's connections. httpcore's connection pool
# scans every connection for every queued request on each change, asking each socket
# whether it expired: quadratic in the pushes in flight. A py-spy profile of a 10,000-task
# run showed the agent spending most of a core there with a queue of thousands, and still
# more than half of its CPU with 64 in flight (2026-12-04): waiting on this semaphore
# instead keeps the pool's queue empty, and 16 connections keep its scan short.
PUSHES_IN_FLIGHT = 16


class CountingClient(httpx.AsyncClient):
    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.slots = asyncio.Semaphore(PUSHES_IN_FLIGHT)

    async def post(self, url: Any, **kwargs: Any) -> httpx.Response:  # type: ignore[override]
        PUSHES["sent"] += 1
        update = (kwargs.get("json") or {}).get("statusUpdate") or {}
        if update.get("status", {}).get("state") == "TASK_STATE_COMPLETED":
            COMPLETED_PUSHED[update.get("taskId", "")] = time.time()
        try:
            asked, asked_at = time.perf_counter(), time.time()
            async with self.slots:
                started = time.perf_counter()
                response = await super().post(url, **kwargs)
                answered = time.perf_counter()
            PUSH_TIMES.append((asked_at, (started - asked) * 1000, (answered - started) * 1000))
        except httpx.HTTPError:
            PUSHES["failed"] += 1
            raise
        if response.status_code >= 400:
            PUSHES["failed"] += 1
        return response


# Gaps between two polls of one task longer than the poll cap and two sweeps: when each
# ended (Unix time) and its length (s), to see whether they cluster in a run.
LONG_GAP = 12.0
LONG_GAPS: list[tuple[float, float]] = []


def _note_poll(task_id: str) -> None:
    now = time.time()
    last = LAST_POLL.get(task_id)
    if last is not None and now - last > LONG_GAP:
        LONG_GAPS.append((now, now - last))
    if task_id in ENDED and task_id not in SEEN:
        SEEN[task_id] = (now, LAST_POLL.get(task_id))
    LAST_POLL[task_id] = now


class Stats:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            path = scope["path"]
            if path == "/_stats":
                body = {"counts": dict(COUNTS), "pushes": PUSHES["sent"]}
                body["pushFailures"] = PUSHES["failed"]
                body["pushTimes"] = PUSH_TIMES
                body["longGaps"] = LONG_GAPS
                await JSONResponse(body)(scope, receive, send)
                return
            if path == "/_ended":
                await JSONResponse(ENDED)(scope, receive, send)
                return
            if path == "/_pushed":
                await JSONResponse(COMPLETED_PUSHED)(scope, receive, send)
                return
            if path == "/_seen":
                await JSONResponse(SEEN)(scope, receive, send)
                return
            kind = _kind(path, scope["method"])
            COUNTS[kind] += 1
            if kind == "get":
                _note_poll(path.rsplit("/", 1)[-1])
        await self.app(scope, receive, send)


def build(url: str, *, push: bool, seconds: float) -> ASGIApp:
    card = pb.AgentCard(
        name="Long-task bench agent",
        description="Works on each task for a while.",
        version="1.0.0",
        supported_interfaces=[
            pb.AgentInterface(url=url, protocol_binding="HTTP+JSON", protocol_version="1.0")
        ],
        capabilities=pb.AgentCapabilities(streaming=False, push_notifications=push),
        default_input_modes=["application/json"],
        default_output_modes=["application/json"],
        skills=[
            pb.AgentSkill(id="ce-review", name="CE review", description="Reviews.", tags=["bench"])
        ],
    )
    extra: dict[str, Any] = {}
    if push:
        store = InMemoryPushNotificationConfigStore()
        limits = httpx.Limits(max_connections=PUSHES_IN_FLIGHT)
        client = CountingClient(timeout=30, limits=limits)
        extra = {
            "push_config_store": store,
            "push_sender": BasePushNotificationSender(client, store),
        }
    handler = DefaultRequestHandler(
        agent_executor=Slow(seconds), task_store=InMemoryTaskStore(), agent_card=card, **extra
    )
    routes = [
        Route("/health", lambda request: JSONResponse({"ok": True})),
        *create_agent_card_routes(card),
        *create_rest_routes(handler),
    ]
    return Stats(Starlette(routes=routes))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("port", type=int)
    parser.add_argument("--push", action="store_true")
    parser.add_argument("--seconds", type=float, default=60.0)
    args = parser.parse_args()
    url = f"http://127.0.0.1:{args.port}"
    app = build(url, push=args.push, seconds=args.seconds)
    uvicorn.run(
        app,
        host="127.0.0.1",
        port=args.port,
        log_level="warning",
        access_log=False,
        lifespan="off",
        backlog=4096,
    )


if __name__ == "__main__":
    main()
