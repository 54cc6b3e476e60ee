"""The per-process background loop that carries channel-layer sends from sync code."""

from __future__ import annotations

import asyncio
import os
import threading
from typing import Any

import pytest

from platform_site.layer_loop import LoopThread


async def _where() -> tuple[str, asyncio.AbstractEventLoop]:
    return threading.current_thread().name, asyncio.get_running_loop()


def test_it_runs_every_send_on_one_background_loop() -> None:
    loop_thread = LoopThread("test-sender")
    first = loop_thread.submit(_where()).result(5)
    second = loop_thread.submit(_where()).result(5)
    assert first[0] == "test-sender"
    assert first[1] is second[1]
    assert first[0] != threading.current_thread().name


def test_it_starts_a_new_loop_in_a_forked_child(monkeypatch: pytest.MonkeyPatch) -> None:
    loop_thread = LoopThread("test-sender")
    parent_loop = loop_thread.loop()
    pid = os.getpid()
    monkeypatch.setattr(os, "getpid", lambda: pid + 1)  # what a child would see
    child_loop = loop_thread.loop()
    assert child_loop is not parent_loop
    assert child_loop.is_running()


def test_a_failed_send_surfaces_on_its_future() -> None:
    async def boom() -> Any:
        raise RuntimeError("layer down")

    future = LoopThread("test-sender").submit(boom())
    with pytest.raises(RuntimeError, match="layer down"):
        future.result(5)
