"""A caller holds at most A2A_MAX_STREAMS_PER_CALLER task streams open in one process: one
more is refused in each binding's error shape before anything is sent (a refused
SendStreamingMessage creates no task), other callers are not affected, and a stream gives
its slot back however it ends."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from a2a.face.db import close_pool
from a2a.face.stream_slots import stream_slots
from a2a.models import Task
from a2a.states import TaskState
from tests.a2a_face.test_asgi import _rpc, _scope
from tests.support.face_streams import FaceStream

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def _two_streams_each(settings: Any) -> Iterator[None]:
    settings.A2A_MAX_STREAMS_PER_CALLER = 2
    yield
    close_pool()


def _subscribe(task: Task, token: str) -> FaceStream:
    return FaceStream(_scope(f"/v1/a2a/tasks/{task.id}:subscribe", "GET", token, b""), b"")


def _stream_message(skill: Any, token: str, message_id: str) -> FaceStream:
    message = {
        "messageId": message_id,
        "role": "ROLE_USER",
        "parts": [{"data": {"product": "lamp"}}],
        "metadata": {"skillId": skill.id},
    }
    body = _rpc("SendStreamingMessage", message=message)
    return FaceStream(_scope("/v1/a2a/jsonrpc", "POST", token, body), body)


def _reason(details: list[dict[str, Any]]) -> str:
    return str(details[0]["reason"])


def test_one_stream_past_the_limit_is_refused_in_each_binding_and_sends_nothing(
    alice: Any, bob: Any, skill: Any, make_task: Callable[..., Task]
) -> None:
    tasks = [make_task(alice) for _ in range(3)]
    bobs = make_task(bob)

    async def scenario() -> None:
        held = [await _subscribe(tasks[0], alice.raw_token).open()]
        held.append(await _stream_message(skill, alice.raw_token, "m-held").open())
        assert [s.status for s in held] == [200, 200]

        refused = await _subscribe(tasks[2], alice.raw_token).open()
        assert refused.status == 429
        error = refused.json()["error"]
        assert error["status"] == "RESOURCE_EXHAUSTED"
        assert _reason(error["details"]) == "TOO_MANY_STREAMS"

        before = await asyncio.to_thread(Task.objects.count)
        rpc = await _stream_message(skill, alice.raw_token, "m-refused").open()
        assert rpc.status == 200
        assert rpc.json()["error"]["code"] == -32000
        assert _reason(rpc.json()["error"]["data"]) == "TOO_MANY_STREAMS"
        assert await asyncio.to_thread(Task.objects.count) == before  # no task was sent

        other = await _subscribe(bobs, bob.raw_token).open()  # bob's own count
        assert other.status == 200

        # A stream whose client went away gives its slot back.
        await held[0].leave()
        again = await _subscribe(tasks[2], alice.raw_token).open()
        assert again.status == 200
        for stream in (held[1], other, again):
            await stream.leave()

    asyncio.run(scenario())
    assert stream_slots._open == {}


def test_a_refused_send_or_subscription_holds_no_slot(
    alice: Any, skill: Any, make_task: Callable[..., Task]
) -> None:
    done = make_task(alice, state=TaskState.COMPLETED)

    async def scenario() -> None:
        for _ in range(3):  # more than the limit: each failure gave its slot back
            final = await _subscribe(done, alice.raw_token).open()
            assert final.status == 400, final.sent  # nothing to subscribe to
            bad = _stream_message(skill, alice.raw_token, "m-bad")
            bad.body = bad.body.replace(skill.id.encode(), b"no-such-skill")
            bad.scope = _scope("/v1/a2a/jsonrpc", "POST", alice.raw_token, bad.body)
            await bad.open()
            assert bad.json()["error"]["code"] == -32602  # refused: no task, no stream

    asyncio.run(scenario())
    assert stream_slots._open == {}


def test_a_slot_given_back_by_the_collector_under_the_lock_does_not_deadlock() -> None:
    """A slot dropped in a reference cycle gives itself back from ``__del__`` when the
    garbage collector runs, which may be on a thread inside ``take`` (holding the lock)."""
    import threading

    from a2a.face.stream_slots import Slot, StreamSlots

    slots = StreamSlots()
    slots._open["k"] = 1

    def collect_under_the_lock() -> None:
        with slots._lock:
            slot = Slot(slots, "k")
            del slot  # __del__ runs here, as a collection pass inside take() would

    worker = threading.Thread(target=collect_under_the_lock, daemon=True)
    worker.start()
    worker.join(5)
    assert not worker.is_alive(), "the slot's give-back waited for its own thread's lock"
    assert slots._open == {}
