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
from types import SimpleNamespace
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from channels.generic.websocket import AsyncWebsocketConsumer
from django.core.handlers.asgi import ASGIHandler

from gateway import consumers
from gateway.consumers import AgentGatewayConsumer
from gateway.db import close_pool, db
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


# A client's close runs disconnect(), which forgets the socket: the kill cut that _forget
# (its presence delete queued behind a busy database thread), and the one in __call__'s
# finally returned at once, the socket already marked forgotten.
class _Layer:
    async def group_discard(self, group: str, channel: str) -> None:
        return None


def test_a_consumer_killed_while_its_disconnect_forgets_still_ends_its_session(
    monkeypatch: Any, settings: Any
) -> None:
    settings.GATEWAY_DB_THREADS = 1
    close_pool()
    ended: list[str] = []
    monkeypatch.setattr(consumers, "end_session", lambda channel: ended.append(channel))
    monkeypatch.setattr(consumers.observe, "disconnected", lambda *a: None)

    async def closed_by_the_client(self: Any, scope: Any, receive: Any, send: Any) -> None:
        # The pool's one thread is busy (a frame's update waiting on a row lock, another
        # socket's claim): the client's close arrives and disconnect() runs.
        busy = asyncio.ensure_future(db(time.sleep)(0.4))
        await asyncio.sleep(0.01)
        try:
            await self.disconnect(1000)
        finally:
            await asyncio.wait({busy})

    monkeypatch.setattr(AsyncWebsocketConsumer, "__call__", closed_by_the_client)
    consumer = AgentGatewayConsumer()
    consumer.agent = SimpleNamespace(id="agent-x")  # type: ignore[assignment]
    consumer.channel_name = "specific.chan!1"
    consumer.channel_layer = _Layer()

    async def scenario() -> bool:
        task = asyncio.ensure_future(consumer({"type": "websocket"}, None, None))
        await asyncio.sleep(0.1)
        task.cancel()  # daphne's kill, application_close_timeout after the client left
        await asyncio.sleep(0.05)
        task.cancel()
        await asyncio.wait({task}, timeout=5)
        await asyncio.sleep(0.8)  # the pool's thread is free again
        return task.done()

    try:
        assert asyncio.run(scenario())
    finally:
        close_pool()
    assert ended == ["specific.chan!1"], "the presence row was never deleted"


def test_a_clean_up_that_fails_after_its_caller_left_is_logged(caplog: Any) -> None:
    async def fails() -> None:
        await asyncio.sleep(0.2)
        raise RuntimeError("database gone")

    async def handler() -> None:
        try:
            await asyncio.sleep(3600)
        finally:
            await to_the_end(fails())

    async def scenario() -> None:
        await _killed_twice(handler)
        await asyncio.sleep(0.4)

    asyncio.run(scenario())
    failed = [r for r in caplog.records if r.name == "platform_site.shielded"]
    assert failed, "the failure of a clean-up nobody awaited any more went unseen"
    assert "database gone" in str(failed[0].exc_info[1])


@pytest.fixture(autouse=True)
def _no_stray_cleanups() -> Any:
    yield
    from platform_site import shielded

    assert not shielded._RUNNING  # each ran to its end within its test
