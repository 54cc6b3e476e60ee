"""Benchmark: platform tasks end to end against a bare send+poll loop (the ceiling).

N tasks go through ``POST /api/tasks`` of a running platform to a local a2a-sdk agent
(``tests/support/agents.py``) that completes at once. Reported: tasks/s end to end (first
creation to last COMPLETED, server clocks), p50/p95 creation→COMPLETED, and the agent's
HTTP requests per task. In the same run the same agent is driven by a bare httpx loop
(``message:send`` with ``returnImmediately`` then ``GET /tasks/{id}`` until final, the
same concurrency): the ceiling. The ratio is platform / ceiling.

    .venv/bin/python bench/dispatch.py [--tasks 500] [--concurrency 16]
        [--mode embedded|distributed|both] [--save FILE] [--write]
    .venv/bin/python bench/dispatch.py --load FILE [--tasks N] [--write]

Embedded: ``manage.py runplatform`` (daphne + in-process Celery worker and beat, SQLite).
Distributed: daphne + ``celery worker`` (threads) + ``celery beat`` on PostgreSQL and
Redis (``BENCH_DATABASE_URL``, default the test server's ``platform_bench`` database,
recreated; ``BENCH_REDIS_URL``). ``--write`` replaces this benchmark's section of
docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import tempfile
import time
import uuid
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import httpx
from dispatch_report import ANALYSIS, table
from procs import (
    BENCH_DATABASE_URL,
    BENCH_REDIS_URL,
    PYTHON,
    Proc,
    cpu_seconds,
    django_script,
    free_port,
    percentile,
    recreate_postgres,
    services_cpu,
    stage_cpu,
)
from report import write_section

A2A = {"A2A-Version": "1.0"}
# The states a task ends in, for both loops (``--behaviour reject`` ends tasks REJECTED).
FINAL = ("TASK_STATE_COMPLETED", "TASK_STATE_FAILED", "TASK_STATE_CANCELED", "TASK_STATE_REJECTED")
# How long either loop waits for its tasks before it gives up.
TIMEOUT = 600.0
# Extra skill input (--behaviour/--seconds): what the test agent should do.
EXTRA_INPUT: dict[str, Any] = {}

SETUP = """
import django; django.setup()
from django.core.management import call_command
call_command("migrate", interactive=False, verbosity=0)
from django.contrib.auth import get_user_model
from agent_profiles.models import AgentProfile, Skill, UserToken
schema_in = {"type": "object", "properties": {"product": {"type": "string"}},
             "required": ["product"]}
schema_out = {"type": "object", "properties": {"verdict": {"enum": ["pass", "fail"]}},
              "required": ["verdict"]}
skill = Skill.objects.create(id="ce-review", name="CE review", domain="compliance",
                             input_schema=schema_in, output_schema=schema_out)
agent = AgentProfile.objects.create(id="bench-agent", name="Bench", a2a_endpoint=AGENT_URL)
agent.skills.set([skill])
user = get_user_model().objects.create_user(username="bench")
print(UserToken.issue(user))
"""

REPORT = """
import json, django; django.setup()
from django.db.models import Count
from a2a.models import Task, TaskEvent
states = dict(Task.objects.values_list("state").annotate(n=Count("id")).values_list("state", "n"))
rows = TaskEvent.objects.filter(to_state="TASK_STATE_COMPLETED").values_list(
    "task__created_at", "at")
lat = [(done - created).total_seconds() for created, done in rows]
first = min(c for c, _ in rows) if rows else None
last = max(d for _, d in rows) if rows else None
span = (last - first).total_seconds() if rows else None
print(json.dumps({"states": states, "latencies": lat, "span": span}))
"""


def agent_requests(agent_url: str) -> int:
    counts = httpx.get(f"{agent_url}/_stats", timeout=5).json()["counts"]
    return sum(n for path, n in counts.items() if path != "/health")


# --- the ceiling: a bare httpx send + poll loop -----------------------------------------


async def ceiling(agent_url: str, total: int, concurrency: int) -> dict[str, Any]:
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    latencies: list[float] = []
    counter = iter(range(total))
    deadline = time.monotonic() + TIMEOUT

    async def loop(client: httpx.AsyncClient) -> None:
        for _ in counter:
            started = time.perf_counter()
            message = {
                "messageId": str(uuid.uuid4()),
                "role": "ROLE_USER",
                "parts": [{"data": {"product": "lamp", **EXTRA_INPUT}}],
                "metadata": {"skillId": "ce-review"},
            }
            body = {"message": message, "configuration": {"returnImmediately": True}}
            answer = (await client.post(f"{agent_url}/message:send", json=body)).json()
            task = answer.get("task") or {}
            while task and task["status"]["state"] not in FINAL:
                if time.monotonic() > deadline:
                    raise TimeoutError(f"the agent's task {task['id']} did not end")
                await asyncio.sleep(0.05)
                task = (await client.get(f"{agent_url}/tasks/{task['id']}")).json()
            latencies.append(time.perf_counter() - started)

    before = agent_requests(agent_url)
    started = time.perf_counter()
    async with httpx.AsyncClient(headers=A2A, timeout=30, limits=limits) as client:
        await asyncio.gather(*(loop(client) for _ in range(concurrency)))
    elapsed = time.perf_counter() - started
    return {
        "tps": total / elapsed,
        "p50": statistics.median(latencies) * 1000,
        "p95": percentile(latencies, 0.95) * 1000,
        "requests": (agent_requests(agent_url) - before) / total,
    }


# --- the platform ---------------------------------------------------------------------


# How tasks are created: one POST /api/tasks each ("single"), or POST /api/tasks:batch
# with BATCH_SIZE bodies per request ("batch").
VIA = {"how": "single"}
BATCH_SIZE = 50


async def create_tasks(url: str, token: str, total: int, concurrency: int) -> list[str]:
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    headers = {"Authorization": f"Bearer {token}"}
    ids: list[str] = []
    body = {"skillId": "ce-review", "input": {"product": "lamp", **EXTRA_INPUT}}
    if VIA["how"] == "batch":
        sizes = [min(BATCH_SIZE, total - start) for start in range(0, total, BATCH_SIZE)]
        batches = iter(sizes)

        async def batch_loop(client: httpx.AsyncClient) -> None:
            for size in batches:
                response = await client.post(
                    f"{url}/api/tasks:batch", json={"tasks": [body] * size}
                )
                results = response.json()["results"]
                if response.status_code != 200 or {r["status"] for r in results} != {201}:
                    raise RuntimeError(f"POST /api/tasks:batch: {response.text[:300]}")
                ids.extend(r["task"]["id"] for r in results)

        async with httpx.AsyncClient(headers=headers, timeout=60, limits=limits) as client:
            await asyncio.gather(*(batch_loop(client) for _ in range(max(1, concurrency // 4))))
        return ids
    counter = iter(range(total))

    async def loop(client: httpx.AsyncClient) -> None:
        for _ in counter:
            response = await client.post(f"{url}/api/tasks", json=body)
            if response.status_code != 201:
                raise RuntimeError(f"POST /api/tasks: {response.status_code} {response.text}")
            ids.append(response.json()["id"])

    async with httpx.AsyncClient(headers=headers, timeout=60, limits=limits) as client:
        await asyncio.gather(*(loop(client) for _ in range(concurrency)))
    return ids


def wait_all_final(url: str, token: str, total: int, timeout: float = TIMEOUT) -> None:
    headers = {"Authorization": f"Bearer {token}"}
    deadline = time.monotonic() + timeout
    with httpx.Client(headers=headers, timeout=30) as client:
        while time.monotonic() < deadline:
            done = 0
            for state in FINAL:
                page = client.get(f"{url}/api/tasks", params={"state": state, "limit": 1})
                done += page.json()["count"]
            if done >= total:
                return
            time.sleep(0.25)
    raise TimeoutError("tasks did not finish")


def platform(
    url: str, token: str, agent_url: str, env: dict[str, str], total: int, concurrency: int
) -> dict[str, Any]:
    before = agent_requests(agent_url)
    started = time.perf_counter()
    asyncio.run(create_tasks(url, token, total, concurrency))
    created = time.perf_counter() - started
    wait_all_final(url, token, total)
    report = json.loads(django_script(REPORT, env))
    latencies = report["latencies"]
    return {
        "tps": len(latencies) / report["span"] if report["span"] else 0.0,
        "p50": statistics.median(latencies) * 1000,
        "p95": percentile(latencies, 0.95) * 1000,
        "requests": (agent_requests(agent_url) - before) / total,
        "states": report["states"],
        "create_rps": total / created,
    }


def run(
    mode: str, total: int, concurrency: int, warmup: int, extra_env: dict[str, str]
) -> dict[str, Any]:
    tmp = Path(tempfile.mkdtemp(prefix=f"bench-dispatch-{mode}-"))
    log = tmp / "processes.log"
    env = {k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "REDIS_URL"}}
    env.update(
        {
            "DJANGO_SETTINGS_MODULE": "platform_site.settings",
            "LOG_LEVEL": "WARNING",
            "PYTHONUNBUFFERED": "1",
            "ALLOW_LOOPBACK_URLS": "true",
            "REGISTRATION_MODE": "open",
            **extra_env,
        }
    )
    if mode == "distributed":
        recreate_postgres(BENCH_DATABASE_URL)
        (tmp / "metrics").mkdir()
        env.update(
            {
                "DATABASE_URL": BENCH_DATABASE_URL,
                "REDIS_URL": BENCH_REDIS_URL,
                # one /metrics page for daphne, worker and beat: the CPU by stage of all
                "PROMETHEUS_MULTIPROC_DIR": str(tmp / "metrics"),
                "CELERY_QUEUE": "dispatch-bench",
                "CHANNELS_PREFIX": "dispatch-bench",
            }
        )
    else:
        env["SQLITE_PATH"] = str(tmp / "db.sqlite3")
    with ExitStack() as stack:
        agent_port = free_port()
        agent_url = f"http://127.0.0.1:{agent_port}"
        agent = Proc([PYTHON, "-m", "tests.support.agents", str(agent_port)], env, log, "agent")
        stack.callback(agent.stop)
        procs = [agent]
        agent.wait_http(f"{agent_url}/health")
        token = django_script(SETUP.replace("AGENT_URL", repr(agent_url)), env)
        port = free_port()
        url = f"http://127.0.0.1:{port}"
        serve = [PYTHON, "manage.py", "runplatform", "--no-migrate", "--no-seed"]
        serve += ["--host", "127.0.0.1", "--port", str(port)]
        server = Proc(serve, {**env, "PUBLIC_URL": url}, log, "platform")
        stack.callback(server.stop)
        procs.append(server)
        if mode == "distributed":
            worker_args = [PYTHON, "-m", "celery", "-A", "platform_site", "worker"]
            worker_args += ["-P", "threads", "-c", "8", "--without-heartbeat"]
            worker_args += ["--without-mingle", "--without-gossip", "-l", "INFO"]
            worker = Proc(worker_args, env, log, "worker")
            stack.callback(worker.stop)
            procs.append(worker)
            beat_args = [PYTHON, "-m", "celery", "-A", "platform_site", "beat"]
            beat_args += ["-S", "celery.beat:Scheduler", "-l", "INFO"]
            beat = Proc(beat_args, env, log, "beat")
            stack.callback(beat.stop)
            procs.append(beat)
            worker.wait_log("ready.")
        server.wait_http(f"{url}/healthz")
        # Warm-up: imports, connections, caches on both paths.
        asyncio.run(ceiling(agent_url, warmup, concurrency))
        asyncio.run(create_tasks(url, token, warmup, concurrency))
        wait_all_final(url, token, warmup)
        django_script(
            "import django; django.setup()\nfrom a2a.models import Task\n"
            "Task.objects.all().delete(); print('ok')",
            env,
        )
        platform_procs = [p for p in procs if p.name != "agent"]
        platform_pids = [p.popen.pid for p in platform_procs]
        agent_cpu = cpu_seconds([agent.popen.pid])
        bare = asyncio.run(ceiling(agent_url, total, concurrency))
        bare["agent_cpu_ms"] = (cpu_seconds([agent.popen.pid]) - agent_cpu) / total * 1000
        agent_cpu, platform_cpu = cpu_seconds([agent.popen.pid]), cpu_seconds(platform_pids)
        by_process = {p.name: cpu_seconds([p.popen.pid]) for p in platform_procs}
        services_before = services_cpu(mode)
        stages_before = stage_cpu(url)
        ours = platform(url, token, agent_url, env, total, concurrency)
        stages_after = stage_cpu(url)
        ours["services"] = {
            name: (seconds - services_before[name]) / total * 1000
            for name, seconds in services_cpu(mode).items()
            if name in services_before
        }
        ours["agent_cpu_ms"] = (cpu_seconds([agent.popen.pid]) - agent_cpu) / total * 1000
        ours["platform_cpu_ms"] = (cpu_seconds(platform_pids) - platform_cpu) / total * 1000
        # Distributed: daphne = the API (creation), worker = dispatch, beat = scheduling.
        ours["stages"] = {
            p.name: (cpu_seconds([p.popen.pid]) - by_process[p.name]) / total * 1000
            for p in platform_procs
        }
        # The threads' CPU by stage of work; the rest is the event loops (HTTP) and
        # threads no stage covers (Celery's own, the beat).
        by_stage = {
            name: (seconds - stages_before.get(name, 0.0)) / total * 1000
            for name, seconds in sorted(stages_after.items())
            if seconds - stages_before.get(name, 0.0) > 0
        }
        by_stage["event loops and other"] = ours["platform_cpu_ms"] - sum(by_stage.values())
        ours["cpu_stages"] = by_stage
    return {
        "mode": mode,
        "via": VIA["how"],
        "tasks": total,
        "concurrency": concurrency,
        "platform": ours,
        "ceiling": bare,
        "log": str(log),
        "date": time.strftime("%Y-%m-%d"),
        "load": os.getloadavg()[0],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=500)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--warmup", type=int, default=50)
    parser.add_argument("--mode", choices=["embedded", "distributed", "both"], default="both")
    parser.add_argument("--behaviour", default="complete", help="the test agent's behaviour")
    parser.add_argument("--seconds", type=float, default=0.0, help="for --behaviour slow")
    parser.add_argument("--env", action="append", default=[], help="KEY=VALUE for the platform")
    parser.add_argument("--write", action="store_true", help="update docs/benchmarks.md")
    parser.add_argument("--via", choices=["single", "batch"], default="single")
    parser.add_argument("--analysis", default="", help="a file whose text replaces ANALYSIS")
    parser.add_argument("--save", default="", help="write the results (JSON) to this file")
    parser.add_argument("--load", default="", help="run nothing: tabulate results saved here")
    args = parser.parse_args()
    VIA["how"] = args.via
    EXTRA_INPUT.update({"behaviour": args.behaviour, "seconds": args.seconds})
    extra_env = dict(item.split("=", 1) for item in args.env)
    modes = ["embedded", "distributed"] if args.mode == "both" else [args.mode]
    if args.load:
        results = json.loads(Path(args.load).read_text())
    else:
        results = []
        for mode in modes:
            try:
                results.append(run(mode, args.tasks, args.concurrency, args.warmup, extra_env))
            except BaseException:
                # A mode that fails (the distributed one without its servers, Ctrl-C)
                # keeps the figures of those before it.
                if results:
                    print(table(results, args.tasks, args.concurrency), flush=True)
                raise
    if args.save:
        Path(args.save).write_text(json.dumps(results, indent=1))
    analysis = Path(args.analysis).read_text() if args.analysis else ANALYSIS
    # Saved results say their own size (older files do not: then the arguments do).
    total = results[-1].get("tasks", args.tasks) if results else args.tasks
    concurrency = results[-1].get("concurrency", args.concurrency) if results else args.concurrency
    section = table(results, total, concurrency) + "\n" + analysis
    print(section)
    for result in results:
        print(f"({result['mode']} process log: {result['log']})")
    if args.write:
        write_section("dispatch", f"## Dispatch (platform tasks end to end)\n\n{section}")


if __name__ == "__main__":
    main()
