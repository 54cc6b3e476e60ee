"""Benchmark: the platform's A2A face against a plain a2a-sdk server on this machine.

Measures requests/s and p50/p99 latency of ``message:send`` (``returnImmediately``) and
``GET /tasks/{id}`` on both, in the same run, and the platform/SDK ratio. The platform runs
as ``make run`` does (embedded: daphne + in-process worker, SQLite) and persists every
task, then dispatches it to a real a2a-sdk agent; the plain server is that same a2a-sdk
agent (``tests/support/agents.py``: Starlette + ``DefaultRequestHandler`` + in-memory store).

    .venv/bin/python bench/a2a_server.py [--requests 2000] [--concurrency 16] [--write]

``--write`` replaces this benchmark's section of docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import tempfile
import time
import uuid
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import httpx
from procs import PYTHON, Proc, django_script, free_port
from report import write_section


def message(behaviour: str = "complete") -> dict[str, Any]:
    return {
        "messageId": str(uuid.uuid4()),
        "role": "ROLE_USER",
        "parts": [{"data": {"product": "lamp", "behaviour": behaviour}}],
        "metadata": {"skillId": "ce-review"},
    }


class Series:
    """Latencies and busy time of one operation on one server, over several rounds."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.latencies: list[float] = []
        self.elapsed = 0.0
        self.count = 0
        self.errors = 0
        self.results: list[Any] = []

    def row(self) -> dict[str, Any]:
        lat = sorted(self.latencies)
        return {
            "name": self.name,
            "count": self.count,
            "rps": self.count / self.elapsed,
            "p50": statistics.median(lat) * 1000,
            "p99": lat[min(len(lat) - 1, int(len(lat) * 0.99))] * 1000,
            "errors": self.errors,
        }


async def measure(
    series: Series | None,
    client: httpx.AsyncClient,
    make_request: Any,
    total: int,
    concurrency: int,
) -> None:
    """Run ``total`` requests, ``concurrency`` at a time, adding to ``series``."""
    counter = iter(range(total))
    target = series or Series("warm-up")

    async def worker() -> None:
        for i in counter:
            method, url, kwargs = make_request(i)
            start = time.perf_counter()
            response = await client.request(method, url, **kwargs)
            target.latencies.append(time.perf_counter() - start)
            if response.status_code != 200:
                target.errors += 1
            else:
                target.results.append(response.json())

    start = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    target.elapsed += time.perf_counter() - start
    target.count += total


async def drain(client: httpx.AsyncClient, base: str, limit: float = 300.0) -> None:
    """Wait until the platform finished dispatching the tasks it was sent (no task left
    SUBMITTED or WORKING), so each round starts from a quiet platform."""
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        busy = 0
        for state in ("TASK_STATE_SUBMITTED", "TASK_STATE_WORKING"):
            page = await client.get(f"{base}/tasks", params={"status": state, "pageSize": 1})
            busy += page.json()["totalSize"]
        if not busy:
            return
        await asyncio.sleep(0.5)


def sender(base: str) -> Any:
    def send(_: int) -> tuple[str, str, dict[str, Any]]:
        body = {"message": message(), "configuration": {"returnImmediately": True}}
        return "POST", f"{base}/message:send", {"json": body}

    return send


def getter(base: str, ids: list[str]) -> Any:
    def get(i: int) -> tuple[str, str, dict[str, Any]]:
        return "GET", f"{base}/tasks/{ids[i % len(ids)]}", {}

    return get


async def compare(
    sdk_url: str, platform_url: str, token: str, total: int, concurrency: int, rounds: int
) -> list[dict[str, Any]]:
    """Alternate short rounds on the two servers so both see the same machine load."""
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    a2a = {"A2A-Version": "1.0"}
    sdk = httpx.AsyncClient(headers=a2a, timeout=60.0, limits=limits)
    auth = {**a2a, "Authorization": f"Bearer {token}"}
    ours = httpx.AsyncClient(headers=auth, timeout=60.0, limits=limits)
    tenant, default = f"{platform_url}/v1/a2a/bench-agent", f"{platform_url}/v1/a2a"
    series = {
        name: Series(name)
        for name in (
            "a2a-sdk message:send",
            "platform message:send",
            "platform message:send (default route)",
            "a2a-sdk GET /tasks/{id}",
            "platform GET /tasks/{id}",
        )
    }
    per_round = max(total // rounds, concurrency)
    async with sdk, ours:
        # Warm-up: connections, imports, caches.
        await measure(None, sdk, sender(sdk_url), 100, concurrency)
        await measure(None, ours, sender(tenant), 100, concurrency)
        await measure(None, ours, sender(default), 100, concurrency)
        await drain(ours, default)
        for _ in range(rounds):
            await measure(
                series["a2a-sdk message:send"], sdk, sender(sdk_url), per_round, concurrency
            )
            await measure(
                series["platform message:send"], ours, sender(tenant), per_round, concurrency
            )
            await drain(ours, default)
            await measure(
                series["platform message:send (default route)"],
                ours,
                sender(default),
                per_round,
                concurrency,
            )
            await drain(ours, default)
        sdk_ids = [r["task"]["id"] for r in series["a2a-sdk message:send"].results]
        our_ids = [r["task"]["id"] for r in series["platform message:send"].results]
        for _ in range(rounds):
            await measure(
                series["a2a-sdk GET /tasks/{id}"],
                sdk,
                getter(sdk_url, sdk_ids),
                per_round,
                concurrency,
            )
            await measure(
                series["platform GET /tasks/{id}"],
                ours,
                getter(tenant, our_ids),
                per_round,
                concurrency,
            )
    return [s.row() for s in series.values()]


def setup_database(env: dict[str, str], agent_url: str) -> str:
    """Migrate a fresh SQLite database, add the skill, the agent and a user; its token."""
    script = f"""
import django; django.setup()
from django.core.management import call_command
call_command("migrate", interactive=False, verbosity=0)
from django.contrib.auth import get_user_model
from agent_profiles.models import AgentProfile, Skill, UserToken
skill = Skill.objects.create(
    id="ce-review", name="CE review",
    input_schema={{"type": "object"}}, output_schema={{"type": "object"}},
)
agent = AgentProfile.objects.create(id="bench-agent", name="Bench", a2a_endpoint={agent_url!r})
agent.skills.set([skill])
user = get_user_model().objects.create_user(username="bench")
print(UserToken.issue(user))
"""
    return django_script(script, env)


def run(total: int, concurrency: int, rounds: int) -> list[dict[str, Any]]:
    tmp = Path(tempfile.mkdtemp(prefix="bench-a2a-"))
    log = tmp / "servers.log"
    env = {k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "REDIS_URL"}}
    env.update(
        {
            "DJANGO_SETTINGS_MODULE": "platform_site.settings",
            "SQLITE_PATH": str(tmp / "db.sqlite3"),
            "LOG_LEVEL": "WARNING",
            "PYTHONUNBUFFERED": "1",
        }
    )
    with ExitStack() as stack:
        agent_port = free_port()
        agent_url = f"http://127.0.0.1:{agent_port}"
        agent = Proc([PYTHON, "-m", "tests.support.agents", str(agent_port)], env, log, "agent")
        stack.callback(agent.stop)
        agent.wait_http(f"{agent_url}/health")
        token = setup_database(env, agent_url)
        port = free_port()
        url = f"http://127.0.0.1:{port}"
        serve = [PYTHON, "manage.py", "runplatform", "--no-migrate", "--no-seed"]
        serve += ["--host", "127.0.0.1", "--port", str(port)]
        platform = Proc(serve, {**env, "PUBLIC_URL": url}, log, "platform")
        stack.callback(platform.stop)
        platform.wait_http(f"{url}/.well-known/agent-card.json")
        rows = asyncio.run(compare(agent_url, url, token, total, concurrency, rounds))
    return rows


def table(rows: list[dict[str, Any]], concurrency: int, rounds: int) -> str:
    by_name = {r["name"]: r for r in rows}
    # The requests made, not those asked for: each round makes at least one per client,
    # so a count that the rounds do not divide (or too small) is rounded.
    total = by_name["platform message:send"]["count"]
    lines = [
        f"`bench/a2a_server.py` — {total} requests per operation and server in {rounds} "
        f"alternating rounds (so both servers see the same machine load), {concurrency} "
        f"concurrent, one process per server, on this machine ({os.cpu_count()} CPUs), "
        f"{time.strftime('%Y-%m-%d')}. The platform runs embedded (daphne + in-process "
        "worker threads, SQLite) and dispatches every task to the a2a-sdk agent; it is idle "
        "(all tasks dispatched) at the start of each of its rounds.",
        "",
        "| Operation | Platform req/s | p50 ms | p99 ms | a2a-sdk req/s | p50 ms | p99 ms "
        "| Ratio |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for op, sdk_op, label in (
        ("message:send", "message:send", "`message:send` (`returnImmediately`), tenant route"),
        (
            "message:send (default route)",
            "message:send",
            "`message:send` (`returnImmediately`), default route (skill + matching)",
        ),
        ("GET /tasks/{id}", "GET /tasks/{id}", "`GET /tasks/{id}`"),
    ):
        ours, sdk = by_name[f"platform {op}"], by_name[f"a2a-sdk {sdk_op}"]
        lines.append(
            f"| {label} | {ours['rps']:.0f} | {ours['p50']:.1f} | {ours['p99']:.1f} "
            f"| {sdk['rps']:.0f} | {sdk['p50']:.1f} | {sdk['p99']:.1f} "
            f"| {ours['rps'] / sdk['rps']:.2f}x |"
        )
    errors = sum(r["errors"] for r in rows)
    lines += ["", f"Non-200 answers during the run: {errors}."]
    return "\n".join(lines)


READING = """
**Reading.** Measured on an idle machine (the benchmark's own processes only). The plain
a2a-sdk server answers `message:send` by storing a task in memory and returning it; the
platform's face, for the same request, authenticates the caller, validates the input
against the skill's schema, matches an agent (default route), stores the task, its
message and its event durably (SQLite here), and its in-process worker then sends the
task to the real a2a-sdk agent and records the answer, on the same 2 CPUs during the
measurement. That is several times the work of the plain server per request, so on a
CPU-bound machine the ratio stays below 1.0x: the aim (at least 1.0x) is **not met**.
Measured in one process without the HTTP server (the ASGI app called directly), the
face's `message:send` costs 2.0 ms of CPU, about as much as `POST /api/tasks`; daphne
adds about 1.6 ms a request and the worker's send and transition about 2.5-4 ms (see
Dispatch), about 6-8 ms in all against the plain server's 2-3 ms (292-503 req/s on one
core), at the VM's speed of 2026-12-03 (on 2026-12-05 the platform's CPU per dispatched
task was about half: 3.0 against 6.4 ms, see Dispatch). Since the evening of 2026-12-05
the face's tasks are claimed at birth, as the tasks API's are: the worker starts each one
as created, with no claim and read of its own (about 1 ms of CPU less per task on that
evening's VM, see Dispatch).

This VM's speed moves between sessions, and the plain server's with it: the same benchmark
gave it 140-182 req/s on the morning of 2026-12-02 and 292-341 in the afternoon, with the
platform at 94-133 and 131-185 req/s, so ratios of 0.53-0.80x then and 0.38-0.63x; on the
evening of 2026-12-03 503 req/s, the platform at 328 and 319 req/s, 0.65x and 0.63x; on
2026-12-05 (this run and three more, 02:09-02:12 UTC, the VM about twice as fast as on
2026-12-03) 664-731 req/s, the platform at 417-505 req/s on the tenant route and 390-470
on the default route: 0.62-0.70x and 0.58-0.64x, the ratio where it was; on the evening
of 2026-12-05 (this run, the VM about half as fast as that morning) 414 req/s, the
platform at 313 and 279 req/s: 0.76x and 0.67x, where the code before the claim at birth had
0.67x and 0.66x in the run just before (394 req/s for the plain server). The platform's
figures rose with the rounds of cuts described in performance-history.md (the latest: no
listing-cursor write for a task its send's answer ends, SQLite statements' placeholders
rewritten once); the ratio follows the plain server's speed more than the platform's.
Creation itself is three INSERTs in one transaction (skill and candidates cached per
process, the candidates' load counted once a second, one INSERT per row kind); the tenant
route picks its skill from the same cache. Reads (`GET /tasks/{id}`: the caller's token,
the task by its id, its conversation) run at 0.94x here (0.90x, 0.94x, 1.04x and 0.95x in
the morning's runs, 0.87-1.00x in runs before): they went from `raw()` querysets, which
worked out 35 columns' converters on every request, to compiled reads (the task by id,
ownership and route checked in Python), 1.9 -> 0.9 ms of CPU per read in one process, and
0.70x -> 0.87-1.00x.
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--rounds", type=int, default=5, help="alternating rounds per server")
    parser.add_argument("--write", action="store_true", help="update docs/benchmarks.md")
    args = parser.parse_args()
    rows = run(args.requests, args.concurrency, args.rounds)
    section = table(rows, args.concurrency, args.rounds)
    print(section)
    if args.write:
        write_section("a2a_server", f"## A2A server face\n\n{section}\n\n{READING.strip()}")


if __name__ == "__main__":
    main()
