"""A face stream's handler cancelled itself ends its stream, and the stream's clean-up
runs to its end.

Daphne cancels an application when it shuts down, and kills one that outlived its client
by ``application_close_timeout`` (a cancel, then again every second). The handler waits on
the view's task (``respond``) in ``asyncio.wait``, which does not pass a cancel on: the
view's task streamed on orphaned, its subscription never closed, and with Redis the
stream's channel stayed in the task's group until ``group_expiry`` (seven days)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from a2a.face import sse
from a2a.face.db import close_pool
from a2a.face.stream_slots import stream_slots
from a2a.models import Task
from a2a.states import TaskState
from tests.a2a_face.test_asgi import _scope
from tests.support.face_streams import FaceStream

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def _close_the_pool() -> Iterator[None]:
    yield
    close_pool()


@pytest.fixture
def closes(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Records each subscription's close, once it has run to its end; the close takes a
    moment (a ``group_discard`` on a busy Redis), so that a second cancel can land in it."""
    ended: list[str] = []
    real_close = sse.Subscription.close

    async def slow_close(self: sse.Subscription) -> None:
        await asyncio.sleep(0.3)
        await real_close(self)
        ended.append(self.group)

    monkeypatch.setattr(sse.Subscription, "close", slow_close)
    return ended


def _respond_task() -> asyncio.Task[Any]:
    return next(t for t in asyncio.all_tasks() if t.get_coro().__name__ == "respond")


@pytest.mark.parametrize("cancels", [1, 2], ids=["shutdown", "killed-twice"])
def test_a_cancelled_handler_ends_its_stream_and_closes_the_subscription(
    cancels: int, closes: list[str], alice: Any, make_task: Callable[..., Task]
) -> None:
    task = make_task(alice)
    Task.objects.filter(pk=task.pk).update(state=TaskState.WORKING)

    async def scenario() -> dict[str, Any]:
        scope = _scope(f"/v1/a2a/tasks/{task.id}:subscribe", "GET", alice.raw_token, b"")
        stream = await FaceStream(scope).open()
        await stream.wait_events(1)
        respond = _respond_task()
        assert stream.handler is not None
        assert stream_slots._open  # streaming, its slot held
        for _ in range(cancels):  # daphne's shutdown, or its kill (a second apart)
            stream.handler.cancel()
            await asyncio.sleep(0.05)
        await asyncio.wait({stream.handler}, timeout=5)
        await asyncio.sleep(1)  # a clean-up a second cancel left behind has time to end
        outcome = {
            "handler_cancelled": stream.handler.done() and stream.handler.cancelled(),
            "respond_done": respond.done(),
            "closes": list(closes),
            "slots": dict(stream_slots._open),
        }
        if not respond.done():  # not to leave it to asyncio.run's close
            respond.cancel()
            await asyncio.wait({respond}, timeout=5)
        return outcome

    outcome = asyncio.run(scenario())
    assert outcome["handler_cancelled"]  # the cancel still reaches daphne
    assert outcome["respond_done"], "the view's task streamed on after its handler ended"
    assert outcome["closes"] == [sse.group_name(task.id)], "the subscription was not closed"
    assert outcome["slots"] == {}, "the stream's slot was not given back"
