"""The gateway side of the reference agent and of the Node.js adapter, against a fake
gateway: a retry (same task id, new messageId) runs the task again, and a ``task.cancel``
or ``task.message`` is acknowledged even for a task the agent does not know (its task
table is in memory: after a restart it knows none), so the platform stops re-sending it.

The adapter runs under real ``node`` with the served template and the fake gateway."""

from __future__ import annotations

import asyncio
import json
import shutil
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path

import pytest
from websockets.asyncio.server import serve

from a2a.adapter import render_adapter
from tests.refagent.support import SKILL
from tests.refagent.test_gateway_side import FakeGateway, assign, connected_agent
from tests.support.processes import Proc, running
from tests.support.serving import free_port

NODE = shutil.which("node")
NODE_DRIVER = """
const { serveAgent } = require("./adapter.js");
serveAgent({ skill: JSON.parse(process.env.SKILL_JSON), http: false }).then((agent) => {
  agent.apiKey = "a2a_test_key";
  agent.gateway.start();
});
"""
Connect = Callable[[], AbstractAsyncContextManager[FakeGateway]]


@asynccontextmanager
async def python_agent() -> AsyncIterator[FakeGateway]:
    """The reference agent's gateway side, connected to a fake gateway."""
    async with connected_agent() as (_agent, gateway):
        yield gateway


def node_connect(tmp: Path) -> Connect:
    """The Node.js adapter (as served) connecting to a fake gateway, its auth frame read."""
    if NODE is None:
        pytest.skip("node is not installed (CI installs it): the Node.js adapter is untested here")
    (tmp / "adapter.js").write_text(render_adapter("http://127.0.0.1:9"))
    (tmp / "driver.js").write_text(NODE_DRIVER)

    @asynccontextmanager
    async def connect() -> AsyncIterator[FakeGateway]:
        gateway = FakeGateway()
        port = free_port()
        async with serve(gateway.handler, "127.0.0.1", port):
            env = {
                "PATH": "/usr/bin:/bin",
                "PLATFORM_URL": f"http://127.0.0.1:{port}",
                "SKILL_JSON": json.dumps(SKILL),
                "RECONNECT_MAX": "0.2",
                # The driver's `http: false` must leave its HTTP port alone: it is taken.
                # (Once read as "on", every run listened on 3001, and two at once failed.)
                "A2A_PORT": str(port),
            }
            args = [NODE, "--experimental-websocket", str(tmp / "driver.js")]
            with running(Proc(args, env, name="node-adapter")) as node:
                try:
                    await gateway.wait_connected()
                except TimeoutError:
                    pytest.fail(f"the adapter did not connect:\n{node.log_text()[-3000:]}")
                assert await gateway.next("auth") == {"type": "auth", "apiKey": "a2a_test_key"}
                yield gateway

    return connect


@pytest.fixture(params=["python", "node"])
def connect(request: pytest.FixtureRequest, tmp_path: Path) -> Connect:
    """How to get a fake gateway with the agent (Python or Node.js) connected to it."""
    return python_agent if request.param == "python" else node_connect(tmp_path)


async def settled(gateway: FakeGateway) -> None:
    """Nothing more came for what was sent: an assignment sent now is answered first
    with its own ack (the agent handles frames in order)."""
    await gateway.send(assign("t-probe", {"product": "p"}))
    assert await gateway.next() == {"type": "task.ack", "deliveryId": "d-t-probe"}


def test_a_cancel_for_a_task_it_does_not_know_is_acknowledged(connect: Connect) -> None:
    """After a restart the platform's cancel finds no task: the ack is the whole answer
    (an update would be about a task it never had, maybe reassigned since)."""

    async def scenario() -> None:
        async with connect() as gateway:
            await gateway.send({"type": "task.cancel", "taskId": "t-gone", "deliveryId": "d-c"})
            assert await gateway.next() == {"type": "task.ack", "deliveryId": "d-c"}
            await settled(gateway)

    asyncio.run(scenario())


def test_a_message_for_a_task_it_does_not_know_is_acknowledged(connect: Connect) -> None:
    """A person's answer for a task lost in a restart: acknowledged, not re-sent forever."""

    async def scenario() -> None:
        async with connect() as gateway:
            answer = {"messageId": "a-1", "role": "ROLE_USER", "parts": [{"text": "EU"}]}
            frame = {"type": "task.message", "taskId": "t-gone", "deliveryId": "d-m"}
            await gateway.send({**frame, "message": answer})
            assert await gateway.next() == {"type": "task.ack", "deliveryId": "d-m"}
            await settled(gateway)

    asyncio.run(scenario())


def test_a_cancel_of_a_running_task_is_acknowledged_and_cancels_it(connect: Connect) -> None:
    """A known task: the ack, then its CANCELED update."""

    async def scenario() -> None:
        async with connect() as gateway:
            await gateway.send(assign("t-3", {"demo": {"delaySeconds": 30}}))
            await gateway.next("task.ack")
            await gateway.next("task.update")  # WORKING
            await gateway.send({"type": "task.cancel", "taskId": "t-3", "deliveryId": "d-c3"})
            assert await gateway.next() == {"type": "task.ack", "deliveryId": "d-c3"}
            canceled = await gateway.next("task.update")
            assert canceled["status"]["state"] == "TASK_STATE_CANCELED"

    asyncio.run(scenario())


def test_a_retried_task_runs_again_instead_of_replaying_the_failure(connect: Connect) -> None:
    """A person's retry sends the same task id with a new messageId and deliveryId: a new
    attempt, run again (the transient cause is gone). A re-delivery of either attempt's
    assignment (a messageId seen before) only gets the last update again."""

    async def scenario() -> None:
        async with connect() as gateway:
            await gateway.send(assign("t-9", {"product": "kettle", "demo": {"fail": "down"}}))
            await gateway.next("task.ack")
            await gateway.next("task.update")  # WORKING
            failed = await gateway.next("task.update")
            assert failed["status"]["state"] == "TASK_STATE_FAILED"
            retry = {**assign("t-9", {"product": "kettle"}, message_id="m-2"), "deliveryId": "d-r"}
            await gateway.send(retry)
            assert await gateway.next() == {"type": "task.ack", "deliveryId": "d-r"}
            working = await gateway.next("task.update")
            assert working["status"]["state"] == "TASK_STATE_WORKING"
            done = await gateway.next("task.update")
            assert done["status"]["state"] == "TASK_STATE_COMPLETED"
            assert done["artifacts"][0]["parts"][0]["data"]["product"] == "kettle"
            for again in (retry, assign("t-9", {"product": "kettle", "demo": {"fail": "down"}})):
                await gateway.send(again)
                assert (await gateway.next())["type"] == "task.ack"
                resent = await gateway.next("task.update")
                assert resent["status"] == done["status"]
            await settled(gateway)

    asyncio.run(scenario())


def test_a_retry_while_the_old_attempt_runs_replaces_it(connect: Connect) -> None:
    """The platform gave up on an attempt still running here (its deadline passed) and
    retried: the new attempt runs and answers; the old one is stopped."""

    async def scenario() -> None:
        async with connect() as gateway:
            await gateway.send(assign("t-8", {"product": "old", "demo": {"delaySeconds": 0.5}}))
            await gateway.next("task.ack")
            await gateway.next("task.update")  # WORKING
            await gateway.send(assign("t-8", {"product": "new"}, message_id="m-2"))
            await gateway.next("task.ack")
            await gateway.next("task.update")  # WORKING
            done = await gateway.next("task.update")
            assert done["artifacts"][0]["parts"][0]["data"]["product"] == "new"
            await asyncio.sleep(0.8)  # past the old attempt's end: it sent nothing
            await settled(gateway)

    asyncio.run(scenario())
