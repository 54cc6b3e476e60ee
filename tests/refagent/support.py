"""Run the reference agent's sides in-process for tests: its HTTP side under uvicorn in a
background thread (no platform needed), driven by the official a2a-sdk client."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import httpx
from reference_agent.agent import ReferenceAgent
from reference_agent.config import Config

from tests.support.serving import free_port

OUTPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "product": {"type": "string"},
        "verdict": {"type": "string", "enum": ["pass", "fail"]},
        "answer": {"type": "string"},
    },
    "required": ["verdict"],
}
SKILL: dict[str, Any] = {
    "id": "ce-review",
    "name": "CE review",
    "description": "Reviews a product for CE marking.",
    "tags": ["compliance"],
    "output_schema": OUTPUT_SCHEMA,
}


def config(**env: str) -> Config:
    return Config.from_env({"A2A_PORT": str(free_port()), "GATEWAY": "off", **env})


@contextmanager
def http_side(skill: dict[str, Any] = SKILL) -> Iterator[ReferenceAgent]:
    """The agent's HTTP side on a free port; ``agent.url`` is its base URL."""
    agent = ReferenceAgent(config())
    agent.skill = skill
    loop = asyncio.new_event_loop()
    stop = asyncio.Event()

    async def serve() -> None:
        agent.start_http()
        await stop.wait()
        await agent.stop_http()

    thread = threading.Thread(target=loop.run_until_complete, args=(serve(),), daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{agent.config.a2a_port}"
    deadline = time.monotonic() + 10
    while True:
        try:
            httpx.get(f"{url}/health", timeout=1)
            break
        except httpx.TransportError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)
    agent.url = url  # type: ignore[attr-defined]
    try:
        yield agent
    finally:
        loop.call_soon_threadsafe(stop.set)
        thread.join(timeout=10)
        loop.close()
