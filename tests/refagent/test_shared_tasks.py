"""The reference agent runs a message once, whichever side got it first: the platform
sends the same message (same ``messageId``) over the WebSocket when its HTTP send failed,
and a send that failed only for the platform (its answer lost, or too late) had reached
the HTTP side, which runs the task. The WebSocket side follows that task instead of
running the skill again: its updates, a person's answer, a cancel."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import pytest
from a2a.server.tasks import InMemoryTaskStore
from reference_agent import skill
from reference_agent.agent import ReferenceAgent
from reference_agent.config import Config
from websockets.asyncio.server import serve

from tests.refagent.support import SKILL
from tests.refagent.test_gateway_side import FakeGateway, assign
from tests.support.serving import free_port


@pytest.fixture
def runs(monkeypatch: pytest.MonkeyPatch) -> Counter[str]:
    """How many turns of the skill each side ran."""
    counted: Counter[str] = Counter()

    def counting(side: str) -> Any:
        async def handle(spec: dict[str, Any], job: skill.Job) -> skill.Outcome:
            counted[side] += 1
            return await skill.handle_task(spec, job)

        return handle

    monkeypatch.setattr("reference_agent.http_side.handle_task", counting("http"))
    monkeypatch.setattr("reference_agent.gateway.handle_task", counting("socket"))
    return counted


@asynccontextmanager
async def both_sides() -> AsyncIterator[tuple[str, FakeGateway, ReferenceAgent]]:
    """The agent with its HTTP side (its URL) and its socket to a fake gateway."""
    gateway = FakeGateway()
    port = free_port()
    async with serve(gateway.handler, "127.0.0.1", port):
        config = Config.from_env(
            {
                "PLATFORM_URL": f"http://127.0.0.1:{port}",
                "A2A_PORT": str(free_port()),
                "RECONNECT_MAX": "0.2",
            }
        )
        agent = ReferenceAgent(config)
        agent.skill, agent.api_key = SKILL, "a2a_test_key"
        agent.start_http()
        runner = asyncio.create_task(agent.gateway.run_forever())
        try:
            await gateway.wait_connected()
            yield f"http://127.0.0.1:{config.a2a_port}", gateway, agent
        finally:
            runner.cancel()
            await agent.stop_http()


async def send_over_http(
    url: str, data: dict[str, Any], message_id: str = "m-1", *, blocking: bool = False
) -> str:
    """The platform's send over HTTP (whose answer it then lost); the agent's task id.
    ``blocking``: without ``returnImmediately``, answered when the task ends."""
    message = {
        "messageId": message_id,
        "role": "ROLE_USER",
        "parts": [{"data": data}],
        "metadata": {"skillId": "ce-review"},
    }
    body = {"message": message, "configuration": {"returnImmediately": not blocking}}
    async with httpx.AsyncClient(timeout=10) as client:
        for _ in range(100):  # the HTTP side starts in the background
            try:
                answer = await client.post(
                    f"{url}/message:send", json=body, headers={"A2A-Version": "1.0"}
                )
                break
            except httpx.TransportError:
                await asyncio.sleep(0.05)
        else:
            raise AssertionError("the HTTP side never answered")
    assert answer.status_code == 200, answer.text
    return str(answer.json()["task"]["id"])


async def blocking_send_under_way(
    url: str, agent: ReferenceAgent, data: dict[str, Any]
) -> asyncio.Task[str]:
    """The platform's blocking send of message m-1, once the HTTP side has the message."""
    http = asyncio.create_task(send_over_http(url, data, blocking=True))
    # The HTTP side offers no event to wait on.
    while (handler := agent.http_handler()) is None or handler.send_of("m-1") is None:  # noqa: ASYNC110
        await asyncio.sleep(0.02)
    return http


async def until_state(gateway: FakeGateway, state: str) -> dict[str, Any]:
    while True:
        frame = await gateway.next("task.update")
        if frame["status"]["state"] == state:
            return frame


def test_a_message_the_http_side_has_is_followed_not_run_again(runs: Counter[str]) -> None:
    async def scenario() -> None:
        async with both_sides() as (url, gateway, _agent):
            await send_over_http(url, {"product": "kettle"})
            await gateway.send(assign("t-1", {"product": "kettle"}, message_id="m-1"))
            assert await gateway.next() == {"type": "task.ack", "deliveryId": "d-t-1"}
            done = await until_state(gateway, "TASK_STATE_COMPLETED")
            assert done["taskId"] == "t-1"
            assert done["artifacts"][0]["parts"][0]["data"]["product"] == "kettle"
            assert done["status"]["message"]["taskId"] == "t-1"  # the platform's ids

    asyncio.run(scenario())
    assert runs == Counter(http=1)


def test_a_question_on_the_http_side_is_answered_over_the_socket(runs: Counter[str]) -> None:
    async def scenario() -> None:
        async with both_sides() as (url, gateway, _agent):
            await send_over_http(url, {"product": "kettle", "demo": {"ask": True}})
            await gateway.send(assign("t-2", {"product": "kettle"}, message_id="m-1"))
            asked = await until_state(gateway, "TASK_STATE_INPUT_REQUIRED")
            assert asked["status"]["message"]["parts"] == [{"text": skill.QUESTION}]
            answer = {"messageId": "a-1", "role": "ROLE_USER", "parts": [{"text": "EU"}]}
            await gateway.send({"type": "task.message", "taskId": "t-2", "message": answer})
            done = await until_state(gateway, "TASK_STATE_COMPLETED")
            assert done["artifacts"][0]["parts"][0]["data"]["answer"] == "EU"

    asyncio.run(scenario())
    assert runs == Counter(http=2)  # two turns, both on the HTTP side's task


def test_a_cancel_over_the_socket_cancels_the_http_sides_task(runs: Counter[str]) -> None:
    async def scenario() -> None:
        async with both_sides() as (url, gateway, _agent):
            await send_over_http(url, {"product": "kettle", "demo": {"delaySeconds": 30}})
            await gateway.send(assign("t-3", {"product": "kettle"}, message_id="m-1"))
            await until_state(gateway, "TASK_STATE_WORKING")
            await gateway.send({"type": "task.cancel", "taskId": "t-3"})
            canceled = await until_state(gateway, "TASK_STATE_CANCELED")
            assert canceled["taskId"] == "t-3"

    asyncio.run(scenario())
    assert runs == Counter(http=1)


def test_another_message_still_runs_on_the_socket(runs: Counter[str]) -> None:
    async def scenario() -> None:
        async with both_sides() as (url, gateway, _agent):
            await send_over_http(url, {"product": "kettle"})
            await gateway.send(assign("t-4", {"product": "toaster"}, message_id="m-2"))
            done = await until_state(gateway, "TASK_STATE_COMPLETED")
            assert done["artifacts"][0]["parts"][0]["data"]["product"] == "toaster"

    asyncio.run(scenario())
    assert runs == Counter(http=1, socket=1)


def test_a_blocking_http_send_holds_up_no_other_frame(runs: Counter[str]) -> None:
    """The platform's blocking send ran out of time and it fell back to the socket while
    the HTTP side still runs the task: the socket side follows that task without waiting
    for the send in its frame loop. It waited there: no other frame of the connection
    (another task's assignment, a cancel) was handled until the skill finished."""

    async def scenario() -> None:
        async with both_sides() as (url, gateway, agent):
            slow = {"product": "kettle", "demo": {"delaySeconds": 3}}
            http = await blocking_send_under_way(url, agent, slow)
            await gateway.send(assign("t-1", {"product": "kettle"}, message_id="m-1"))
            await gateway.send(assign("t-9", {"product": "toaster"}, message_id="m-9"))
            done = await until_state(gateway, "TASK_STATE_COMPLETED")
            assert done["taskId"] == "t-9"
            assert not http.done()  # t-9 went through while the HTTP side still ran t-1
            await http
            done = await until_state(gateway, "TASK_STATE_COMPLETED")
            assert done["taskId"] == "t-1"

    asyncio.run(scenario())
    assert runs == Counter(http=1, socket=1)


@pytest.mark.parametrize("save_delay", [0.0, 0.5])
def test_a_cancel_while_the_http_sides_blocking_send_runs_cancels_its_task(
    runs: Counter[str], monkeypatch: pytest.MonkeyPatch, save_delay: float
) -> None:
    """The platform's blocking send ran out of time, it fell back to the socket (the HTTP
    side still runs the task), then a person cancels: the cancel waited for that send to
    answer, i.e. for the task's end, and canceled nothing; the skill ran to its end.

    ``save_delay``: the SDK saves each task that much later. The executor names its task
    as it hands the SDK the first event; the socket side read it before the save, found
    nothing, took it for gone and never told the platform anything (on a loaded machine,
    late in the full suite: no WORKING frame)."""
    if save_delay:
        save = InMemoryTaskStore.save

        async def slow_save(store: InMemoryTaskStore, task: Any, context: Any) -> None:
            await asyncio.sleep(save_delay)
            await save(store, task, context)

        monkeypatch.setattr(InMemoryTaskStore, "save", slow_save)

    async def scenario() -> None:
        async with both_sides() as (url, gateway, agent):
            slow = {"product": "kettle", "demo": {"delaySeconds": 30}}
            http = await blocking_send_under_way(url, agent, slow)
            await gateway.send(assign("t-1", {"product": "kettle"}, message_id="m-1"))
            await until_state(gateway, "TASK_STATE_WORKING")
            await gateway.send({"type": "task.cancel", "taskId": "t-1"})
            canceled = await until_state(gateway, "TASK_STATE_CANCELED")
            assert canceled["taskId"] == "t-1"
            assert await http  # the HTTP side's blocking send answers: its task ended

    asyncio.run(scenario())
    assert runs == Counter(http=1)
