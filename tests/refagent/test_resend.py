"""The reference agent sends again an update the platform may not have stored.

The gateway answers a stored ``task.update`` with nothing; a ``pong`` confirms the frames
sent before its ``ping`` (docs/gateway.md). An update the platform could not store is
answered ``internal_error`` ("send it again later"), and one it never read (the socket
closed first) is not answered at all. The reference agent logged the error and went on:
its COMPLETED was lost, and its acknowledged task stayed SUBMITTED for good.
"""

from __future__ import annotations

import asyncio
import importlib
from typing import Any

import pytest

from tests.refagent.test_gateway_side import FakeGateway, assign, connected_agent

INTERNAL_ERROR = {"type": "error", "code": "internal_error", "message": "could not apply it"}


async def completed(gateway: FakeGateway, task_id: str) -> dict[str, Any]:
    """Assign ``task_id``; its COMPLETED update."""
    await gateway.send(assign(task_id, {"product": "kettle"}))
    await gateway.next("task.ack")
    assert (await gateway.next("task.update"))["status"]["state"] == "TASK_STATE_WORKING"
    done = await gateway.next("task.update")
    assert done["status"]["state"] == "TASK_STATE_COMPLETED"
    return done


async def nothing_more(gateway: FakeGateway, wait: float = 0.3) -> bool:
    try:
        frame = await asyncio.wait_for(gateway.next(), wait)
    except TimeoutError:
        return True
    raise AssertionError(f"unexpected frame {frame}")


@pytest.fixture(autouse=True)
def quick_resend(monkeypatch: pytest.MonkeyPatch) -> None:
    gateway_side = importlib.import_module("reference_agent.gateway")
    monkeypatch.setattr(gateway_side, "RESEND_DELAY", 0.05, raising=False)


def test_an_internal_error_sends_the_unconfirmed_update_again() -> None:
    async def scenario() -> None:
        async with connected_agent() as (_agent, gateway):
            done = await completed(gateway, "t-1")
            await gateway.send(INTERNAL_ERROR)
            assert await gateway.next("task.update") == done

    asyncio.run(scenario())


def test_a_close_before_the_pong_sends_it_again_on_the_next_connection() -> None:
    async def scenario() -> None:
        async with connected_agent() as (_agent, gateway):
            done = await completed(gateway, "t-2")
            await gateway.connections[-1].close(1011)  # a handler crash, say
            await gateway.wait_connected(2)
            assert await gateway.next("task.update") == done

    asyncio.run(scenario())


def test_an_update_confirmed_by_a_pong_is_not_sent_again() -> None:
    async def scenario() -> None:
        async with connected_agent(ping=0.05) as (_agent, gateway):
            await gateway.send(assign("t-3", {"product": "kettle"}))
            done = False
            while True:  # the platform's side: every ping answered, in order
                frame = await asyncio.wait_for(gateway.frames.get(), 10)
                if frame["type"] == "ping":
                    await gateway.send({"type": "pong"})
                    if done:  # this pong confirms the COMPLETED sent before its ping
                        break
                elif frame["type"] == "task.update":
                    done = frame["status"]["state"] == "TASK_STATE_COMPLETED"
            await asyncio.sleep(0.1)
            await gateway.send(INTERNAL_ERROR)  # about another frame: nothing to resend
            await gateway.connections[-1].close()
            await gateway.wait_connected(2)
            assert await nothing_more(gateway)

    asyncio.run(scenario())
