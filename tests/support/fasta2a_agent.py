"""An A2A agent built with FastA2A (``fasta2a``, the A2A library behind Pydantic AI's
``agent.to_a2a()``), for the platform's tests: another library's server, with its own
storage, broker and worker, speaking A2A 1.0 JSON-RPC at ``/`` (it answers every send
``submitted`` and works after, so the platform follows it by listing or polls).

Run as ``python -m tests.support.fasta2a_agent PORT`` (:func:`run_fasta2a_agent` does, in
a child process: FastA2A needs its ASGI lifespan). What the worker does is chosen by the
message's data part, ``behaviour``: ``complete`` (an artifact ``{"verdict": "pass"}``),
``slow`` (the same after ``seconds``), ``crash`` (the worker raises: FastA2A fails the
task). ``GET /_stats`` answers the JSON-RPC calls counted by method.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import uuid
from collections import Counter
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import Any

import httpx
import uvicorn
from fasta2a import FastA2A, Worker
from fasta2a.broker import InMemoryBroker
from fasta2a.schema import Artifact, Part, Skill, TaskIdParams, TaskSendParams
from fasta2a.storage import InMemoryStorage
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

CALLS: Counter[str] = Counter()


class BehaviourWorker(Worker[list[Any]]):
    """Runs each task by its ``behaviour`` (FastA2A runs one operation at a time)."""

    async def run_task(self, params: TaskSendParams) -> None:
        task = await self.storage.load_task(params["id"])
        assert task is not None
        await self.storage.update_task(task["id"], state="working")
        data: dict[str, Any] = {}
        for part in params["message"].get("parts", []):
            if isinstance(part.get("data"), dict):
                data = dict(part["data"])
        if data.get("behaviour") == "crash":
            raise RuntimeError("the agent's code failed")
        if data.get("behaviour") == "slow":
            await asyncio.sleep(float(data.get("seconds", 1)))
        artifact = Artifact(
            artifact_id=str(uuid.uuid4()),
            name="result",
            parts=[Part(data={"verdict": "pass"})],
        )
        await self.storage.update_task(task["id"], state="completed", new_artifacts=[artifact])

    async def cancel_task(self, params: TaskIdParams) -> None:
        await self.storage.update_task(params["id"], state="canceled")

    def build_message_history(self, history: list[Any]) -> list[Any]:
        return history

    def build_artifacts(self, result: Any) -> list[Artifact]:
        return []


class CountCalls:
    """Counts each JSON-RPC call by its method (the body is read again by the app)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] != "POST":
            await self.app(scope, receive, send)
            return
        chunks: list[bytes] = []
        more = True
        while more:
            message = await receive()
            chunks.append(message.get("body", b""))
            more = message.get("more_body", False)
        body = b"".join(chunks)
        try:
            CALLS[str(json.loads(body).get("method"))] += 1
        except (ValueError, AttributeError):
            CALLS["?"] += 1
        sent = False

        async def replay() -> dict[str, Any]:
            nonlocal sent
            if sent:
                return await receive()
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}

        await self.app(scope, replay, send)


async def stats(request: Request) -> JSONResponse:
    return JSONResponse(dict(CALLS))


def build_app(url: str) -> ASGIApp:
    storage: InMemoryStorage[list[Any]] = InMemoryStorage()
    broker = InMemoryBroker()
    worker = BehaviourWorker(storage=storage, broker=broker)

    @asynccontextmanager
    async def lifespan(app: FastA2A) -> AsyncIterator[None]:
        async with app.task_manager, worker.run():
            yield

    skill = Skill(
        id="ce-review",
        name="CE review",
        description="Reviews a product.",
        tags=["compliance"],
        input_modes=["application/json"],
        output_modes=["application/json"],
    )
    app = FastA2A(
        storage=storage,
        broker=broker,
        lifespan=lifespan,
        url=url,
        name="FastA2A test agent",
        skills=[skill],
        routes=[Route("/_stats", stats)],
    )
    return CountCalls(app)


class FastA2AAgent:
    """A running FastA2A agent: its URL and the calls it counted."""

    __test__ = False

    def __init__(self, url: str) -> None:
        self.url = url

    def calls(self) -> dict[str, int]:
        return httpx.get(f"{self.url}/_stats", timeout=5).json()


@contextmanager
def run_fasta2a_agent() -> Iterator[FastA2AAgent]:
    """The agent in a child process on a free loopback port."""
    from tests.support.processes import PYTHON, Proc, running
    from tests.support.serving import free_port

    port = free_port()
    args = [PYTHON, "-m", "tests.support.fasta2a_agent", str(port)]
    with running(Proc(args, dict(os.environ), name="fasta2a-agent")) as proc:
        url = f"http://127.0.0.1:{port}"
        proc.wait_http(f"{url}/_stats")
        yield FastA2AAgent(url)


def main() -> None:
    port = int(sys.argv[1])
    url = f"http://127.0.0.1:{port}"
    uvicorn.run(build_app(url), host="127.0.0.1", port=port, log_level="warning")


if __name__ == "__main__":
    main()
