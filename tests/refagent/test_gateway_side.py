"""The reference agent's WebSocket side, against a real WebSocket server that speaks the
gateway's frames (DESIGN.md "Agent gateway"); the platform's own gateway is exercised in
the end-to-end tests."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
from reference_agent.agent import ReferenceAgent
from reference_agent.config import Config
from reference_agent.skill import QUESTION, schema_errors
from websockets.asyncio.server import ServerConnection, serve

from tests.refagent.support import OUTPUT_SCHEMA, SKILL
from tests.support.serving import free_port


class FakeGateway:
    """The platform's side of the socket: records frames, lets the test send some."""

    def __init__(self) -> None:
        self.frames: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        self.connections: list[ServerConnection] = []
        self.headers: list[str | None] = []
        self._connected = asyncio.Condition()

    async def handler(self, ws: ServerConnection) -> None:
        async with self._connected:
            self.connections.append(ws)
            self._connected.notify_all()
        self.headers.append(ws.request.headers.get("Authorization") if ws.request else None)
        async for raw in ws:
            await self.frames.put(json.loads(raw))

    async def send(self, frame: dict[str, Any]) -> None:
        await self.connections[-1].send(json.dumps(frame))

    async def next(self, kind: str | None = None) -> dict[str, Any]:
        """The next frame (of ``kind``), skipping pings."""
        async with asyncio.timeout(10):
            while True:
                frame = await self.frames.get()
                if frame["type"] != "ping" and kind in (None, frame["type"]):
                    return frame

    async def wait_connected(self, count: int = 1, seconds: float = 10) -> None:
        async with asyncio.timeout(seconds), self._connected:
            await self._connected.wait_for(lambda: len(self.connections) >= count)


@asynccontextmanager
async def connected_agent(ping: float = 20.0) -> AsyncIterator[tuple[ReferenceAgent, FakeGateway]]:
    """The reference agent's WebSocket side, connected to a :class:`FakeGateway`
    (``ping``: seconds between its pings, WS_PING_INTERVAL)."""
    gateway = FakeGateway()
    port = free_port()
    async with serve(gateway.handler, "127.0.0.1", port):
        env = {"PLATFORM_URL": f"http://127.0.0.1:{port}", "A2A_HTTP": "off"}
        config = Config.from_env(env | {"RECONNECT_MAX": "0.2", "WS_PING_INTERVAL": str(ping)})
        agent = ReferenceAgent(config)
        agent.skill, agent.api_key = SKILL, "a2a_test_key"
        runner = asyncio.create_task(agent.gateway.run_forever())
        try:
            await gateway.wait_connected()
            yield agent, gateway
        finally:
            runner.cancel()


def assign(task_id: str, data: dict[str, Any], message_id: str = "m-1") -> dict[str, Any]:
    message = {
        "messageId": message_id,
        "role": "ROLE_USER",
        "parts": [{"data": data}],
        "metadata": {"skillId": "ce-review"},
    }
    return {
        "type": "task.assign",
        "deliveryId": f"d-{task_id}",
        "skillId": "ce-review",
        "task": {"id": task_id, "contextId": "ctx-1", "status": {"state": "TASK_STATE_SUBMITTED"}},
        "message": message,
    }


def test_it_authenticates_acks_and_runs_an_assigned_task_to_completion() -> None:
    async def scenario() -> None:
        async with connected_agent() as (_agent, gateway):
            assert gateway.headers == ["Bearer a2a_test_key"]
            await gateway.send(assign("t-1", {"product": "kettle"}))
            assert await gateway.next() == {"type": "task.ack", "deliveryId": "d-t-1"}
            working = await gateway.next("task.update")
            assert working["taskId"] == "t-1"
            assert working["status"]["state"] == "TASK_STATE_WORKING"
            done = await gateway.next("task.update")
            assert done["status"]["state"] == "TASK_STATE_COMPLETED"
            (artifact,) = done["artifacts"]
            output = artifact["parts"][0]["data"]
            assert output["product"] == "kettle"
            assert schema_errors(OUTPUT_SCHEMA, output) == []

    asyncio.run(scenario())


def test_it_answers_a_redelivered_assignment_without_running_it_again() -> None:
    async def scenario() -> None:
        async with connected_agent() as (agent, gateway):
            await gateway.send(assign("t-1", {"product": "kettle"}))
            await gateway.next("task.ack")
            await gateway.next("task.update")
            first = await gateway.next("task.update")
            await gateway.send(assign("t-1", {"product": "kettle"}))
            assert (await gateway.next())["type"] == "task.ack"
            assert await gateway.next("task.update") == first  # the last update, re-sent
            assert list(agent.gateway.tasks) == ["t-1"]

    asyncio.run(scenario())


def test_it_asks_over_the_socket_and_continues_with_the_answer() -> None:
    async def scenario() -> None:
        async with connected_agent() as (_agent, gateway):
            await gateway.send(assign("t-2", {"product": "kettle", "demo": {"ask": True}}))
            await gateway.next("task.ack")
            await gateway.next("task.update")  # WORKING
            asked = await gateway.next("task.update")
            assert asked["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
            assert asked["status"]["message"]["parts"] == [{"text": QUESTION}]
            answer = {"messageId": "a-1", "role": "ROLE_USER", "parts": [{"text": "EU"}]}
            frame = {"type": "task.message", "taskId": "t-2", "message": answer}
            await gateway.send(frame)
            await gateway.send(frame)  # the same answer twice: one turn
            await gateway.next("task.update")  # WORKING
            done = await gateway.next("task.update")
            assert done["status"]["state"] == "TASK_STATE_COMPLETED"
            assert done["artifacts"][0]["parts"][0]["data"]["answer"] == "EU"
            await gateway.send({"type": "ping"})  # unknown here: ignored, no reply
            assert gateway.frames.empty()

    asyncio.run(scenario())


def test_it_cancels_a_running_task_when_told() -> None:
    async def scenario() -> None:
        async with connected_agent() as (agent, gateway):
            await gateway.send(assign("t-3", {"demo": {"delaySeconds": 30}}))
            await gateway.next("task.ack")
            await gateway.next("task.update")  # WORKING
            await gateway.send({"type": "task.cancel", "taskId": "t-3"})
            canceled = await gateway.next("task.update")
            assert canceled["status"]["state"] == "TASK_STATE_CANCELED"
            await asyncio.sleep(0)
            assert agent.gateway.tasks["t-3"].running.cancelled()  # type: ignore[union-attr]

    asyncio.run(scenario())


def test_it_rejects_an_assignment_for_another_skill() -> None:
    async def scenario() -> None:
        async with connected_agent() as (_agent, gateway):
            frame = assign("t-4", {})
            frame["skillId"] = "other-skill"
            await gateway.send(frame)
            await gateway.next("task.ack")
            rejected = await gateway.next("task.update")
            assert rejected["status"]["state"] == "TASK_STATE_REJECTED"

    asyncio.run(scenario())


def test_it_reconnects_and_sends_what_happened_while_away() -> None:
    async def scenario() -> None:
        async with connected_agent() as (_agent, gateway):
            await gateway.send(assign("t-5", {"product": "p", "demo": {"delaySeconds": 0.3}}))
            await gateway.next("task.ack")
            await gateway.next("task.update")  # WORKING
            await gateway.connections[-1].close()  # the platform restarts, say
            await gateway.wait_connected(2)
            done = await gateway.next("task.update")  # finished while away, sent on return
            assert done["taskId"] == "t-5"
            assert done["status"]["state"] == "TASK_STATE_COMPLETED"

    asyncio.run(scenario())


def test_it_ignores_frames_it_cannot_read() -> None:
    async def scenario() -> None:
        async with connected_agent() as (agent, gateway):
            await gateway.connections[-1].send("not json")
            await gateway.send({"no": "type"})
            await gateway.send({"type": "error", "code": "bad_frame", "message": "?"})
            await gateway.send({"type": "task.message", "taskId": "unknown", "message": {}})
            await gateway.send(assign("t-6", {"product": "p"}))
            assert (await gateway.next())["type"] == "task.ack"
            assert agent.gateway.connected

    asyncio.run(scenario())


def test_a_handler_that_raises_fails_the_task(monkeypatch: pytest.MonkeyPatch) -> None:
    async def broken(skill: dict[str, Any], job: Any) -> Any:
        raise RuntimeError("boom")

    monkeypatch.setattr("reference_agent.gateway.handle_task", broken)

    async def scenario() -> None:
        async with connected_agent() as (_agent, gateway):
            await gateway.send(assign("t-7", {}))
            await gateway.next("task.ack")
            await gateway.next("task.update")  # WORKING
            failed = await gateway.next("task.update")
            assert failed["status"]["state"] == "TASK_STATE_FAILED"
            assert "boom" in failed["status"]["message"]["parts"][0]["text"]

    asyncio.run(scenario())
