"""A handler's clean-up runs to its end when daphne kills the handler.

Daphne cancels an application that outlives its client by ``application_close_timeout``,
then again every second until it ends. The first cancel reached a ``finally`` whose
clean-up the next one cut off: a gateway consumer's presence row stayed (its agent
"online" with no socket), a request's database connections stayed open
(platform_site/shielded.py).
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from channels.generic.websocket import AsyncWebsocketConsumer
from django.core.handlers.asgi import ASGIHandler

from gateway.consumers import AgentGatewayConsumer
from platform_site import lean_asgi
from platform_site.shielded import to_the_end


async def _killed_twice(handler: Any) -> bool:
    """Run ``handler()`` and cancel it as daphne kills one: twice, a moment apart; whether
    the handler ended cancelled."""
    task = asyncio.ensure_future(handler())
    await asyncio.sleep(0.05)
    task.cancel()  # the kill, application_close_timeout after the client left
    await asyncio.sleep(0.05)
    task.cancel()  # and a second later, again
    await asyncio.wait({task}, timeout=5)
    return task.cancelled()


def test_work_awaited_to_its_end_survives_its_callers_cancels() -> None:
    finished: list[str] = []

    async def clean_up() -> None:
        await asyncio.sleep(0.3)
        finished.append("clean")

    async def handler() -> None:
        try:
            await asyncio.sleep(3600)
        finally:
            await to_the_end(clean_up())

    async def scenario() -> bool:
        cancelled = await _killed_twice(handler)
        await asyncio.sleep(0.5)
        return cancelled

    assert asyncio.run(scenario()) is True  # the caller still sees its cancel
    assert finished == ["clean"]


def test_a_killed_gateway_consumer_still_forgets_its_socket(monkeypatch: Any) -> None:
    """_forget (group, presence row, the process's live set) waited for a database thread
    when daphne's second cancel came: the row stayed, the agent counted as online."""
    forgotten: list[str] = []

    async def stuck(self: Any, scope: Any, receive: Any, send: Any) -> None:
        await asyncio.sleep(3600)  # e.g. a frame whose update waits on a row lock

    async def forget(self: Any) -> None:
        await asyncio.sleep(0.3)  # the presence row's delete, on a busy database thread
        forgotten.append("forgot")

    monkeypatch.setattr(AsyncWebsocketConsumer, "__call__", stuck)
    monkeypatch.setattr(AgentGatewayConsumer, "_forget", forget)
    consumer = AgentGatewayConsumer()

    async def scenario() -> None:
        await _killed_twice(lambda: consumer({"type": "websocket"}, None, None))
        await asyncio.sleep(0.5)

    asyncio.run(scenario())
    assert forgotten == ["forgot"]


def test_a_killed_request_still_closes_its_database_connections(monkeypatch: Any) -> None:
    """The close is queued on the request's one sync thread behind the view still running
    there; daphne's second cancel dropped it before it ran, and the thread's connection
    stayed open (285 idle PostgreSQL connections after a burst, once)."""
    closed: list[str] = []

    async def view_still_running(self: Any, scope: Any, receive: Any, send: Any) -> None:
        await sync_to_async(time.sleep)(0.4)  # the request's sync thread, busy

    monkeypatch.setattr(ASGIHandler, "handle", view_still_running)
    monkeypatch.setattr(lean_asgi, "close_connections", lambda: closed.append("closed"))
    handler = lean_asgi.PlatformASGIHandler()

    async def scenario() -> None:
        await _killed_twice(lambda: handler.handle({"type": "http"}, None, None))
        await asyncio.sleep(0.8)  # the view's thread is free again

    asyncio.run(scenario())
    assert closed == ["closed"]


@pytest.fixture(autouse=True)
def _no_stray_cleanups() -> Any:
    yield
    from platform_site import shielded

    assert not shielded._RUNNING  # each ran to its end within its test
