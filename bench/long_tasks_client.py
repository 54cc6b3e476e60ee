"""The client side of ``bench/long_tasks.py``: creating the tasks (at once or paced),
counting the finished ones, reading the platform's memory and what the agents saw."""

from __future__ import annotations

import asyncio
import sqlite3
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

FINAL = ("TASK_STATE_COMPLETED", "TASK_STATE_FAILED", "TASK_STATE_CANCELED", "TASK_STATE_REJECTED")


@dataclass
class AgentsSaw:
    """What the bench agents (``bench/long_agent.py``) counted and noted, all of them."""

    counts: Counter[str] = field(default_factory=Counter)  # requests by kind
    pushes: int = 0
    push_failures: int = 0
    push_times: list[list[float]] = field(default_factory=list)
    long_gaps: list[list[float]] = field(default_factory=list)  # between two polls of a task
    ended: dict[str, float] = field(default_factory=dict)
    pushed: dict[str, float] = field(default_factory=dict)
    seen: dict[str, list[float | None]] = field(default_factory=dict)


def agents_saw(agent_urls: list[str]) -> AgentsSaw:
    """Read every agent's figures (one agent's task ids never clash with another's)."""
    saw = AgentsSaw()
    for agent_url in agent_urls:
        stats = httpx.get(f"{agent_url}/_stats", timeout=30).json()
        saw.counts.update(stats["counts"])
        saw.pushes += stats.get("pushes", 0)
        saw.push_failures += stats.get("pushFailures", 0)
        saw.push_times += stats.get("pushTimes", [])
        saw.long_gaps += stats.get("longGaps", [])
        for path, into in (("_ended", saw.ended), ("_pushed", saw.pushed), ("_seen", saw.seen)):
            into.update(httpx.get(f"{agent_url}/{path}", timeout=60).json())
    return saw


def rss_mib(pids: list[int]) -> float:
    total = 0
    for pid in pids:
        try:
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1])
        except OSError:
            continue
    return total / 1024


async def create(url: str, token: str, total: int, seconds: float, rate: float = 0.0) -> float:
    """Create the tasks in batches of 100, as fast as the platform takes them, or at
    ``rate`` tasks a second; returns when the last was created."""
    headers = {"Authorization": f"Bearer {token}"}
    if rate > 0:
        return await _create_paced(url, headers, total, seconds, rate)
    batches = [min(100, total - start) for start in range(0, total, 100)]
    queue = iter(batches)

    async def loop(client: httpx.AsyncClient) -> None:
        for size in queue:
            items = [{"skillId": "ce-review", "input": {"seconds": seconds}} for _ in range(size)]
            response = await client.post(f"{url}/api/tasks:batch", json={"tasks": items})
            statuses = {r["status"] for r in response.json()["results"]}
            if response.status_code != 200 or statuses != {201}:
                raise RuntimeError(f"batch: {response.status_code} {response.text[:300]}")

    async with httpx.AsyncClient(headers=headers, timeout=120) as client:
        await asyncio.gather(*(loop(client) for _ in range(4)))
    return time.time()


async def _create_paced(
    url: str, headers: dict[str, str], total: int, seconds: float, rate: float
) -> float:
    """Ten batches a second (below ten tasks a second, a task a batch), each sent on time
    whether or not the ones before were answered (a platform that falls behind sees the
    requests pile up, as it would)."""
    size = max(1, min(100, round(rate / 10)))
    items = [{"skillId": "ce-review", "input": {"seconds": seconds}}]

    async def batch(client: httpx.AsyncClient, count: int) -> None:
        response = await client.post(f"{url}/api/tasks:batch", json={"tasks": items * count})
        statuses = {r["status"] for r in response.json()["results"]}
        if response.status_code != 200 or statuses != {201}:
            raise RuntimeError(f"batch: {response.status_code} {response.text[:300]}")

    limits = httpx.Limits(max_connections=64)
    async with httpx.AsyncClient(headers=headers, timeout=120, limits=limits) as client:
        start, sent, pending = time.monotonic(), 0, []
        while sent < total:
            await asyncio.sleep(max(0.0, start + sent / rate - time.monotonic()))
            count = min(size, total - sent)
            pending.append(asyncio.create_task(batch(client, count)))
            sent += count
        await asyncio.gather(*pending)
    return time.time()


class FinalCounter:
    """Counts the tasks in a final state, read from the database itself over one
    connection: through the platform's API (four counts a second) the counting cost the
    platform about a second of CPU in a run, which its CPU per task then carried (8 ms a
    task at 100 in flight)."""

    def __init__(self, mode: str, env: dict[str, str]) -> None:
        marks = ", ".join(["%s" if mode == "distributed" else "?"] * len(FINAL))
        self.query = f"SELECT count(*) FROM a2a_task WHERE state IN ({marks})"
        if mode == "distributed":
            import psycopg

            self.conn: Any = psycopg.connect(env["DATABASE_URL"], autocommit=True)
        else:
            self.conn = sqlite3.connect(f"file:{env['SQLITE_PATH']}?mode=ro", uri=True)

    def __call__(self) -> int:
        return int(self.conn.execute(self.query, FINAL).fetchone()[0])

    def close(self) -> None:
        self.conn.close()
