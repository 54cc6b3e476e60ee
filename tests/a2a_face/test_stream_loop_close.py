"""A stream's reader ends with its event loop, even when a cancel gets lost on the way.

A stream's first event is produced in the view (``sse_response``), which opens the task's
:class:`~a2a.face.sse.Subscription` and its reader task. Served synchronously (Django's
test client, any ``async_to_sync``) the view runs in a loop of its own that ends when the
view returns, so the reader is not closed by its subscription: the loop's close cancels
it. On Python 3.11 that cancel can be lost: redis-py writes every command through
``asyncio.wait_for(..., socket_timeout)``, and 3.11's ``wait_for`` returns normally when the
cancel lands as its write completes (CPython gh-86296, fixed in 3.12). channels_redis then
pops on (BZPOPMIN every 5 s) forever and the loop's close waited for it forever: the whole
test run hung in ``Client.post("/v1/a2a/message:stream")``.
"""

from __future__ import annotations

import asyncio
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from channels.layers import channel_layers, get_channel_layer
from redis.asyncio.connection import AbstractConnection

from a2a.face import sse
from a2a.face.db import close_pool
from a2a.face.stream_slots import stream_slots
from a2a.models import Task
from a2a.states import TaskState
from tests.support.asgi_calls import http_scope
from tests.support.face_streams import FaceStream


class SwallowingLayer:
    """A shared channel layer whose receive ignores the first cancel it gets, as a
    channels_redis receive does when the cancel lands in redis-py's ``wait_for``; it gives
    up by itself after ``gives_up_after`` seconds (so the old code ends late, not never)."""

    def __init__(self, gives_up_after: float) -> None:
        self.gives_up_after = gives_up_after
        self.lost = 0  # cancels ignored
        self.sent: list[tuple[str, dict[str, Any]]] = []

    async def new_channel(self) -> str:
        return "specific.test!one"

    async def group_add(self, group: str, channel: str) -> None:
        return None

    async def group_discard(self, group: str, channel: str) -> None:
        return None

    async def send(self, channel: str, message: dict[str, Any]) -> None:
        self.sent.append((channel, message))

    async def receive(self, channel: str) -> dict[str, Any]:
        deadline = time.monotonic() + self.gives_up_after
        while time.monotonic() < deadline:
            try:
                await asyncio.sleep(0.01)  # a blocking pop
            except asyncio.CancelledError:
                if self.lost:
                    raise
                self.lost += 1  # lost, as 3.11's wait_for loses it
        return {"type": sse.CLOSE_TYPE}


def _open_and_leave(task_id: Any) -> Callable[[], Any]:
    """A loop's work that opens a subscription and ends without closing it, as a view
    serving a stream's first event does."""

    async def view() -> sse.Subscription:
        sub = sse.Subscription(task_id, watched=True)
        await sub.open()
        await asyncio.sleep(0.05)  # the reader is popping
        return sub

    return lambda: asyncio.run(view())


def test_a_reader_that_loses_a_cancel_still_ends_with_its_loop(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    layer = SwallowingLayer(gives_up_after=5.0)
    monkeypatch.setattr(sse, "get_channel_layer", lambda: layer)
    monkeypatch.setattr(sse.listeners, "mark", lambda task_id: None)
    started = time.monotonic()
    sub = _open_and_leave("0b6f4bb2-5a4e-4c43-9d0e-4d1b8f5b1f10")()
    took = time.monotonic() - started
    assert layer.lost == 1  # the loop's cancel was lost once...
    assert took < 2.0, f"the loop's close waited {took:.1f} s for the reader"  # ...not fatal
    assert sub._reader is not None
    assert sub._reader.done()


def test_closing_a_subscription_whose_reader_ended_sends_no_close_message(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The loop's close cancelled the reader, then closes the stream's generator (its
    subscription): a close message for the gone reader would sit in the process's shared
    Redis queue until some other reader popped it into a buffer nobody reads."""
    layer = SwallowingLayer(gives_up_after=5.0)
    layer.lost = 1  # this layer's receive cancels at once
    monkeypatch.setattr(sse, "get_channel_layer", lambda: layer)
    monkeypatch.setattr(sse.listeners, "mark", lambda task_id: None)

    async def stream_left_open() -> Any:
        stream = sse.Subscription("0b6f4bb2-5a4e-4c43-9d0e-4d1b8f5b1f10", watched=True)

        async def events() -> Any:
            async with stream:
                yield 1
                await asyncio.sleep(3600)
                yield 2

        first = events()
        assert await anext(first) == 1
        return first  # the loop ends: its close cancels the reader, then closes `first`

    asyncio.run(stream_left_open())
    assert layer.sent == []


# --- the real thing: channels_redis on Redis ------------------------------------------


@pytest.fixture
def _fresh_channel_layer() -> Iterator[None]:
    """A new channel layer: the Redis layer keeps receive state across loops."""
    channel_layers.backends.clear()
    yield
    channel_layers.backends.clear()


@pytest.mark.distributed
@pytest.mark.usefixtures("_fresh_channel_layer")
def test_a_stream_left_open_by_its_loop_does_not_hang_the_loops_close(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The loop ends exactly as the reader's first Redis write completes: the loop's
    cancel reaches the reader inside redis-py's ``wait_for``, which loses it."""
    layer = get_channel_layer()
    write = AbstractConnection._send_packed_command
    hook: dict[str, Any] = {}

    async def write_then_end_the_view(self: AbstractConnection, command: Any) -> None:
        await write(self, command)
        reached = hook.get("reached")  # (only the view's loop: the sender loop writes too)
        if reached is not None and reached.get_loop() is asyncio.get_running_loop():
            hook.pop("reached").set_result(None)  # the view returns now...
            await asyncio.sleep(0)  # ...and the write completes with it

    monkeypatch.setattr(AbstractConnection, "_send_packed_command", write_then_end_the_view)

    async def view() -> sse.Subscription:
        sub = sse.Subscription(uuid.uuid4(), watched=True)  # (the row's mark: not here)
        await sub.open()  # its reader's first write is next
        hook["reached"] = asyncio.get_running_loop().create_future()
        await hook["reached"]
        return sub

    result: dict[str, Any] = {}
    thread = threading.Thread(target=lambda: result.update(sub=asyncio.run(view())), daemon=True)
    thread.start()
    thread.join(timeout=12)  # a reader losing the cancel pops for 5 s at a time
    hung = thread.is_alive()
    if hung:  # let the lost reader go: it returns on the close message
        channel = next(iter(layer.receive_buffer), None)
        if channel is not None:
            asyncio.run(layer.send(channel, {"type": sse.CLOSE_TYPE}))
        thread.join(timeout=12)
    assert not hung, "the view's loop never closed: its stream's reader lost the cancel"
    assert result["sub"]._reader.done()
    assert layer.receive_count == 0  # the next loop's readers may receive


# --- the stream's wait for its next event ------------------------------------------------
# Subscription.next waited with asyncio.wait_for(queue.get(), wait): a client leaving (the
# face's handler cancels the stream) in the loop iteration an event reached the queue lost
# the cancel (gh-86296), and the stream went on, holding its slot and its subscription,
# until daphne's kill 10 s later (or the task's end).


@pytest.fixture
def _fresh_layer_and_pool() -> Any:
    channel_layers.backends.clear()
    yield
    channel_layers.backends.clear()
    close_pool()


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("_fresh_layer_and_pool")
@pytest.mark.parametrize(
    "event_first", [True, False], ids=["event-then-cancel", "cancel-then-event"]
)
def test_a_stream_whose_client_leaves_as_an_event_arrives_ends(
    event_first: bool, monkeypatch: pytest.MonkeyPatch, alice: Any, make_task: Any
) -> None:
    task: Task = make_task(alice)
    Task.objects.filter(pk=task.pk).update(state=TaskState.WORKING)
    subs: list[sse.Subscription] = []
    real_init = sse.Subscription.__init__

    def recording_init(self: sse.Subscription, *a: Any, **k: Any) -> None:
        real_init(self, *a, **k)
        subs.append(self)

    monkeypatch.setattr(sse.Subscription, "__init__", recording_init)

    async def scenario() -> dict[str, Any]:
        headers = [
            (b"authorization", f"Bearer {alice.raw_token}".encode()),
            (b"a2a-version", b"1.0"),
        ]
        stream = FaceStream(http_scope(f"/v1/a2a/tasks/{task.id}:subscribe", headers=headers))
        await stream.open()
        await stream.wait_events(1)
        respond = next(t for t in asyncio.all_tasks() if t.get_coro().__name__ == "respond")
        assert stream_slots._open  # the stream holds its slot
        await asyncio.sleep(0.2)  # the stream waits in Subscription.next

        real_cancel = respond.cancel

        def cancel_as_the_event_arrives(msg: Any = None) -> bool:
            snap = {
                "type": sse.MESSAGE_TYPE,
                "seq": 10_000,
                "task": {"id": str(task.id), "status": {"state": "TASK_STATE_WORKING"}},
            }
            # The reader's put and the handler's cancel in one loop iteration.
            if event_first:
                subs[-1].queue.put_nowait(snap)
                return real_cancel(msg)
            cancelled = real_cancel(msg)
            subs[-1].queue.put_nowait(snap)
            return cancelled

        # (asyncio.Task.cancel cannot be patched on the type: wrap the one task's method.)
        respond.cancel = cancel_as_the_event_arrives  # type: ignore[method-assign]
        left = time.monotonic()
        stream.gone.set()  # the client goes away
        done, _ = await asyncio.wait({stream.handler}, timeout=8)
        result = {
            "ended": bool(done),
            "after": time.monotonic() - left,
            "slots": dict(stream_slots._open),
            "reader_running": subs[-1]._reader is not None and not subs[-1]._reader.done(),
        }
        if not done:  # what daphne does 10 s later: cancel the whole handler
            stream.handler.cancel()
            await asyncio.wait({stream.handler}, timeout=10)
        return result

    result = asyncio.run(scenario())
    assert result["ended"], (
        f"the handler of a stream whose client left was still running {result['after']:.1f} s "
        f"later (slots held: {result['slots']}, reader running: {result['reader_running']})"
    )
