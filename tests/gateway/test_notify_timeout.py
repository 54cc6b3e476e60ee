"""A gateway hint that outlasts its caller's wait is cancelled, and hints share the
sender's bound on sends in flight (gateway/notify.py, platform_site/layer_loop.py).

On a stalled Redis a hint went on after ``group_send`` had given up on it (until the
layer's socket timeout, 30 s): each caller (a Celery worker, a request thread) moved on to
the next hint, and the stalled ones piled up on the sender's loop, past its
``CONCURRENCY`` bound, which they did not go through."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import pytest

from gateway import notify
from platform_site import layer_loop


class StalledLayer:
    """A shared (not in-memory) channel layer whose sends take ``seconds``; counts the
    sends in flight, and the ones cancelled."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.running = 0
        self.most = 0
        self.cancelled = threading.Event()
        self.lock = threading.Lock()

    async def group_send(self, group: str, event: dict[str, Any]) -> None:
        with self.lock:
            self.running += 1
            self.most = max(self.most, self.running)
        try:
            await asyncio.sleep(self.seconds)
        except asyncio.CancelledError:
            self.cancelled.set()
            raise
        finally:
            with self.lock:
                self.running -= 1


@pytest.fixture
def sender(monkeypatch: pytest.MonkeyPatch) -> layer_loop.LoopThread:
    """A sender of this test's own (its loop and bound), not the process's."""
    loop_thread = layer_loop.LoopThread("test-notify-sender")
    monkeypatch.setattr(notify, "sender", loop_thread)
    return loop_thread


def test_a_hint_that_times_out_is_cancelled_not_left_running(
    monkeypatch: pytest.MonkeyPatch, sender: layer_loop.LoopThread
) -> None:
    layer = StalledLayer(seconds=30)  # a stalled Redis: the socket timeout
    monkeypatch.setattr(notify, "get_channel_layer", lambda: layer)
    started = time.monotonic()
    assert notify.group_send("agent-a", {"type": notify.DELIVER_EVENT}, timeout=0.2) is False
    assert time.monotonic() - started < 5
    assert layer.cancelled.wait(5), "the hint went on after its caller gave up on it"
    deadline = time.monotonic() + 5
    while layer.running and time.monotonic() < deadline:
        time.sleep(0.01)
    assert layer.running == 0


def test_hints_from_many_threads_keep_to_the_senders_bound(
    monkeypatch: pytest.MonkeyPatch, sender: layer_loop.LoopThread
) -> None:
    monkeypatch.setattr(layer_loop, "CONCURRENCY", 2)
    layer = StalledLayer(seconds=0.2)  # a slow Redis
    monkeypatch.setattr(notify, "get_channel_layer", lambda: layer)
    results: list[bool] = []

    def hint(i: int) -> None:
        results.append(notify.group_send(f"agent-{i}", {"type": notify.DELIVER_EVENT}))

    threads = [threading.Thread(target=hint, args=(i,)) for i in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    assert results == [True] * 6  # each waits its turn, none is lost
    assert layer.most <= 2, f"{layer.most} hints in flight at once, past the bound of 2"
