"""Benchmark of the agent gateway: N agent sockets on ONE platform process.

    .venv/bin/python bench/gateway.py --mode both 1000 --write  # what docs/benchmarks.md shows
    .venv/bin/python bench/gateway.py --mode distributed 1000 5000

``--mode embedded`` runs ``manage.py runplatform`` (daphne + in-process worker and beat,
SQLite, in-memory channel layer); ``--mode distributed`` runs one daphne process on
PostgreSQL + Redis (``BENCH_DATABASE_URL``, default the test server's ``platform_bench``
database, recreated; ``BENCH_REDIS_URL``). ``both`` runs each in a child process of its
own (the mode is fixed when Django starts) and writes one table.

For each N it creates N socket-only agents (no HTTP endpoint: the gateway is their only
transport) with keys, starts the platform on a free 127.0.0.1 port and measures:

* connect rate: N WebSocket handshakes with ``Authorization: Bearer`` (200 in flight),
  counted until every connection has its presence row;
* **create → assign**: ``POST /api/tasks`` (``agentId`` set, one task per agent,
  ``--posters`` requests in flight) until the agent's socket has the ``task.assign``
  frame — the latency an operator sees; also from the ``201`` answer to the frame;
* ack round trip: ``task.ack`` followed by ``ping``, until the ``pong`` (frames of one
  connection are handled in order, so the pong proves the ack was written);
* server memory per connection: the platform process's RSS before and after connecting.

It binds loopback only, raises its open-file limit, stops everything by itself
(``--timeout``) and prints its table (each child of ``--mode both`` or of several
``--posters`` prints its own as it ends, so a failure later keeps what came before);
``--write`` also puts it into docs/benchmarks.md, between ``<!-- bench:gateway -->``
markers.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from gateway_report import section
from procs import BASE_DIR, BENCH_DATABASE_URL, BENCH_REDIS_URL, recreate_postgres
from report import write_section

sys.path.insert(0, str(BASE_DIR))


def raise_fd_limit(wanted: int) -> int:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = min(max(soft, wanted), hard)
    resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
    return target


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


# --- one mode, in this process (Django set up for it) -----------------------------------


def setup_django(mode: str) -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "platform_site.settings")
    os.environ["LOG_LEVEL"] = "WARNING"
    os.environ.pop("DATABASE_URL", None)
    os.environ.pop("REDIS_URL", None)
    if mode == "distributed":
        recreate_postgres(BENCH_DATABASE_URL)
        os.environ["DATABASE_URL"] = BENCH_DATABASE_URL
        os.environ["REDIS_URL"] = BENCH_REDIS_URL
        os.environ["CHANNELS_PREFIX"] = "gateway-bench"
        os.environ["CELERY_QUEUE"] = "gateway-bench"
    else:
        tmp = Path(tempfile.mkdtemp(prefix="bench-gateway-"))
        os.environ["SQLITE_PATH"] = str(tmp / "db.sqlite3")
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", interactive=False, verbosity=0)


def make_world(n: int) -> tuple[list[tuple[str, str]], str]:
    """N socket-only agents offering one skill, and a user token; closes its connection."""
    from django.contrib.auth import get_user_model
    from django.db import connections

    from agent_profiles import keys
    from agent_profiles.models import AgentProfile, ApiKey, Skill, UserToken

    try:
        skill = Skill.objects.create(
            id="bench-skill",
            name="Bench",
            input_schema={"type": "object"},
            output_schema={"type": "object"},
        )
        agents, api_keys, creds = [], [], []
        for i in range(n):
            agent_id = f"bench-{i:05d}"
            new = keys.generate("a2a")
            agents.append(AgentProfile(id=agent_id, name=agent_id))
            api_keys.append(ApiKey(agent_id=agent_id, prefix=new.prefix, digest=new.digest))
            creds.append((agent_id, new.raw))
        AgentProfile.objects.bulk_create(agents, batch_size=1000)
        ApiKey.objects.bulk_create(api_keys, batch_size=1000)
        through = AgentProfile.skills.through
        through.objects.bulk_create(
            [through(agentprofile_id=a.id, skill_id=skill.id) for a in agents], batch_size=1000
        )
        user = get_user_model().objects.create_user(username="bench")
        return creds, UserToken.issue(user)
    finally:
        connections.close_all()


def reset_world() -> None:
    from django.contrib.auth import get_user_model
    from django.db import connections

    from a2a.models import Task
    from agent_profiles.models import AgentProfile, Skill
    from gateway.models import Presence

    Presence.objects.all().delete()
    Task.objects.all().delete()
    AgentProfile.objects.all().delete()
    Skill.objects.all().delete()
    get_user_model().objects.all().delete()
    connections.close_all()


def presence_count() -> int:
    from django.db import connections

    from gateway.models import Presence

    try:
        return Presence.objects.count()
    finally:
        connections.close_all()


class Agent:
    """One benchmark socket: records when each task arrives and times ack round trips."""

    def __init__(self, agent_id: str, key: str) -> None:
        self.agent_id, self.key = agent_id, key
        self.ws: Any = None
        self.received: dict[str, float] = {}
        self.arrived = asyncio.Event()
        self.pong = asyncio.Event()
        self.ack_rtt: float | None = None
        self._ack_sent = 0.0

    async def connect(self, url: str) -> None:
        import websockets

        self.ws = await websockets.connect(
            url,
            additional_headers={"Authorization": f"Bearer {self.key}"},
            ping_interval=None,
            open_timeout=60,
            max_queue=None,
        )
        asyncio.get_running_loop().create_task(self.read())

    async def read(self) -> None:
        async for raw in self.ws:
            now = time.perf_counter()
            frame = json.loads(raw)
            if frame["type"] == "task.assign":
                self.received[frame["task"]["id"]] = now
                self.arrived.set()
                self._ack_sent = time.perf_counter()
                ack = {"type": "task.ack", "deliveryId": frame["deliveryId"]}
                await self.ws.send(json.dumps(ack))
                await self.ws.send('{"type":"ping"}')
            elif frame["type"] == "pong":
                self.ack_rtt = now - self._ack_sent
                self.pong.set()


async def wait_for(predicate: Any, within: float, step: float = 0.1) -> bool:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if await asyncio.to_thread(predicate):
            return True
        await asyncio.sleep(step)
    return False


async def run_once(
    n: int, base_url: str, server_pid: int, posters: int, creds: list[tuple[str, str]], token: str
) -> dict[str, Any]:
    import httpx

    load_before = os.getloadavg()[0]
    rss_before = rss_kib(server_pid)
    ws_url = base_url.replace("http://", "ws://") + "/ws/agent-gateway/"
    agents = [Agent(agent_id, key) for agent_id, key in creds]
    gate = asyncio.Semaphore(200)

    async def connect(agent: Agent) -> None:
        async with gate:
            await agent.connect(ws_url)

    started = time.perf_counter()
    await asyncio.gather(*(connect(a) for a in agents))
    all_present = await wait_for(lambda: presence_count() >= n, within=180)
    connect_secs = time.perf_counter() - started
    await asyncio.sleep(1.0)  # let the server settle before reading its memory
    rss_after = rss_kib(server_pid)

    sent_at: dict[str, float] = {}
    answered_at: dict[str, float] = {}
    order = iter(agents)
    limits = httpx.Limits(max_connections=posters, max_keepalive_connections=posters)
    headers = {"Authorization": f"Bearer {token}"}

    async def poster(client: httpx.AsyncClient) -> None:
        for agent in order:
            body = {"skillId": "bench-skill", "input": {"n": 1}, "agentId": agent.agent_id}
            t0 = time.perf_counter()
            response = await client.post(f"{base_url}/api/tasks", json=body)
            t1 = time.perf_counter()
            if response.status_code != 201:
                raise RuntimeError(f"POST /api/tasks: {response.status_code} {response.text}")
            task_id = response.json()["id"]
            sent_at[task_id], answered_at[task_id] = t0, t1

    post_t0 = time.perf_counter()
    async with httpx.AsyncClient(headers=headers, timeout=60, limits=limits) as client:
        await asyncio.gather(*(poster(client) for _ in range(posters)))
    create_secs = time.perf_counter() - post_t0
    arrivals = (asyncio.wait_for(a.arrived.wait(), 30) for a in agents)
    await asyncio.gather(*arrivals, return_exceptions=True)
    pongs = (asyncio.wait_for(a.pong.wait(), 30) for a in agents)
    await asyncio.gather(*pongs, return_exceptions=True)

    received = {tid: at for a in agents for tid, at in a.received.items()}
    latencies = [(received[t] - sent_at[t]) * 1000 for t in sent_at if t in received]
    after_201 = [(received[t] - answered_at[t]) * 1000 for t in sent_at if t in received]
    answers = [(answered_at[t] - sent_at[t]) * 1000 for t in sent_at]
    acks = [a.ack_rtt * 1000 for a in agents if a.ack_rtt is not None]
    await asyncio.gather(*(a.ws.close() for a in agents), return_exceptions=True)
    return {
        "n": n,
        "all_connected": all_present,
        "connect_rate": n / connect_secs,
        "rss_before_mib": rss_before / 1024,
        "rss_after_mib": rss_after / 1024,
        "kib_per_conn": (rss_after - rss_before) / n,
        "delivered": len(latencies),
        "all_delivered": len(latencies) == n,
        "create_rate": n / create_secs,
        "p50": statistics.median(latencies) if latencies else float("nan"),
        "p99": pct(latencies, 0.99),
        "max": max(latencies) if latencies else float("nan"),
        "after_201_p50": statistics.median(after_201) if after_201 else float("nan"),
        "after_201_p99": pct(after_201, 0.99),
        "answer_p50": statistics.median(answers) if answers else float("nan"),
        "ack_p50": statistics.median(acks) if acks else float("nan"),
        "ack_p99": pct(acks, 0.99),
        "load": max(load_before, os.getloadavg()[0]),
    }


def run_mode(mode: str, sizes: list[int], posters: int, timeout: float) -> list[dict[str, Any]]:
    setup_django(mode)
    from tests.support.processes import daphne_process, embedded_platform

    results = []
    for n in sizes:
        creds, token = make_world(n)
        env = {"GATEWAY_HEARTBEAT_TIMEOUT": 600, "LOG_LEVEL": "WARNING"}
        server = embedded_platform(**env) if mode == "embedded" else daphne_process(**env)
        with server as proc:
            try:
                result = asyncio.run(
                    asyncio.wait_for(
                        run_once(n, proc.url, proc.pid, posters, creds, token),  # type: ignore[attr-defined]
                        timeout,
                    )
                )
            finally:
                errors = [ln for ln in proc.log_text().splitlines() if "Error" in ln]
                print(f"server log: {len(errors)} error lines", *errors[-10:], sep="\n")
        result["mode"] = mode
        results.append(result)
        print(json.dumps(result, indent=1), flush=True)
        reset_world()
    return results


# --- the report ---------------------------------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("sizes", nargs="*", type=int, default=[1000])
    parser.add_argument("--mode", choices=["embedded", "distributed", "both"], default="both")
    parser.add_argument("--posters", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--timeout", type=float, default=600.0, help="stop after this many s")
    parser.add_argument("--json", help="write the results here (used by --mode both)")
    parser.add_argument("--write", action="store_true", help="update docs/benchmarks.md")
    args = parser.parse_args()
    limit = raise_fd_limit(max(args.sizes) * 2 + 1000)
    print(f"open-file limit {limit}", flush=True)
    results: list[dict[str, Any]] = []
    if args.mode == "both" or len(args.posters) > 1:
        # One child process per run: the mode is fixed when Django starts, and each run
        # gets a fresh platform.
        modes = ("embedded", "distributed") if args.mode == "both" else (args.mode,)
        for mode in modes:
            for posters in args.posters:
                out = Path(tempfile.mkstemp(prefix=f"bench-gateway-{mode}-", suffix=".json")[1])
                cmd = [sys.executable, __file__, "--mode", mode, "--json", str(out)]
                cmd += ["--posters", str(posters), "--timeout", str(args.timeout)]
                cmd += [str(n) for n in args.sizes]
                subprocess.run(cmd, check=True, timeout=args.timeout * len(args.sizes) + 300)
                results += json.loads(out.read_text())
    else:
        results = run_mode(args.mode, args.sizes, args.posters[0], args.timeout)
        for result in results:
            result["posters"] = args.posters[0]
        if args.json:
            Path(args.json).write_text(json.dumps(results))
    text = section(results)
    print(text)
    if args.write:
        write_section("gateway", text)


if __name__ == "__main__":
    main()
