"""Benchmark: many long tasks in flight, at an agent that pushes and at one that does not.

    .venv/bin/python bench/long_tasks.py --tasks 2000 --seconds 60 --agent push poll list
        [--mode embedded|distributed] [--agents N] [--workers N] [--save FILE] [--write]
    .venv/bin/python bench/long_tasks.py --load FILE... [--write]

N tasks are created through ``POST /api/tasks:batch`` (100 per request) for
``bench/long_agent.py`` agents (``--agents``, default 1, each its own process and
registered agent; the platform spreads the tasks) whose tasks each take ``--seconds`` at
the agent. Measured:

* platform CPU (cores) and RSS while the tasks are in flight (the plateau: from the last
  creation until the agent ends its first task), and CPU ms per task over the whole run,
  also net of what the idle platform spends (measured for 10 s before the first task);
* agent requests per task (sends, polls, listings) and pushes per task;
* notice delay: the platform's COMPLETED (its ``TaskEvent``) minus the moment the agent
  ended the task (both clocks of this machine), p50 / p95 / max;
* in the saved JSON only: the platform's CPU per task by stage (``a2a_cpu_seconds_total``),
  and the gaps of over 12 s between two polls of one task, when they came
  (``long_poll_gaps``).

``--agent``: ``push`` (the agent pushes), ``poll`` (it does not; each task is polled on its
own: ``A2A_LIST_INTERVAL=0``), ``list`` (it does not; the platform lists its tasks, the
default for an A2A 1.0 agent).

Embedded: ``manage.py runplatform`` (SQLite). Distributed: daphne + ``celery worker`` +
``celery beat`` on PostgreSQL + Redis (``BENCH_DATABASE_URL`` recreated,
``BENCH_REDIS_URL``), ``--workers`` worker processes (default 1). Loopback only; every
process is stopped at the end, and a run gives up after ``--timeout`` seconds.
``--write`` replaces this benchmark's table in docs/benchmarks.md (the reading after
it stays, unless ``--analysis`` names a file with a new one); ``--save`` keeps
each run's result so that runs made separately (a cost curve: 100 to 10,000 tasks)
become one table with ``--load`` (the saved result also has the delays per second of the
agents' ends: when in a run the late notices were). ``--steady`` keeps N in flight
instead of creating N at once: it creates 2N at N / ``--seconds`` a second, and measures
the window from the first end to the last creation, where tasks start and end at that
rate (the delays: of the tasks that ended in it).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import threading
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from long_tasks_client import FinalCounter, agents_saw, create, rss_mib
from long_tasks_report import delays_by_second, long_gaps_since, poll_split, quantiles, table
from procs import (
    BENCH_DATABASE_URL,
    BENCH_REDIS_URL,
    PYTHON,
    Proc,
    cpu_seconds,
    django_script,
    failed_calls,
    free_port,
    percentile,
    recreate_postgres,
    services_cpu,
    stage_cpu,
)
from report import READING_MARK, kept_reading, write_section

SETUP = """
import django; django.setup()
from django.core.management import call_command
call_command("migrate", interactive=False, verbosity=0)
from django.contrib.auth import get_user_model
from agent_profiles.models import AgentProfile, Skill, UserToken
schema_out = {"type": "object", "properties": {"verdict": {"enum": ["pass", "fail"]}},
              "required": ["verdict"]}
skill = Skill.objects.create(id="ce-review", name="CE review", domain="compliance",
                             input_schema={"type": "object"}, output_schema=schema_out)
for i, url in enumerate(AGENT_URLS):
    agent = AgentProfile.objects.create(id=f"long-agent-{i}", name="Long", a2a_endpoint=url)
    agent.skills.set([skill])
user = get_user_model().objects.create_user(username="bench")
print(UserToken.issue(user))
"""

REPORT = """
import json, django; django.setup()
from django.db.models import Count
from a2a.models import Task, TaskEvent
states = dict(Task.objects.values_list("state").annotate(n=Count("id")).values_list("state", "n"))
done = dict(TaskEvent.objects.filter(to_state="TASK_STATE_COMPLETED").values_list(
    "task__remote_task_id", "at"))
follow = dict(Task.objects.values_list("metadata__followedBy").annotate(n=Count("id"))
              .values_list("metadata__followedBy", "n"))
print(json.dumps({"states": states, "done": {k: v.timestamp() for k, v in done.items()},
                  "followedBy": {str(k): v for k, v in follow.items()}}))
"""

IDLE_SECONDS = 10.0


def run(
    mode: str,
    kind: str,
    total: int,
    seconds: float,
    timeout: float,
    agents: int = 1,
    steady: bool = False,
    workers: int = 1,
) -> dict[str, Any]:
    """One run. ``steady``: ``total`` tasks stay in flight for ``seconds``: twice as many
    are created at ``total / seconds`` a second, so from the first end to the last
    creation tasks start and end at that rate, the steady state of ``total`` in flight
    (without it they are created as fast as the platform takes them, and all end in the
    few seconds that took: a burst of ends)."""
    in_flight = total
    if steady:
        total *= 2
    tmp = Path(tempfile.mkdtemp(prefix=f"bench-long-{mode}-{kind}-"))
    log = tmp / "processes.log"
    env = {k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "REDIS_URL"}}
    env.update(
        {
            "DJANGO_SETTINGS_MODULE": "platform_site.settings",
            "LOG_LEVEL": "WARNING",
            "PYTHONUNBUFFERED": "1",
            "ALLOW_LOOPBACK_URLS": "true",
            "A2A_TASK_TIMEOUT": str(max(300.0, seconds * 5)),
            # 10,000 polled tasks over four agents need about 280 polls a second each at
            # the 10 s cap, more while young; the default 100 would space them out to 25 s.
            "A2A_AGENT_POLL_RATE": os.environ.get("A2A_AGENT_POLL_RATE", "500"),
            # "poll": each task polled on its own; "list": the platform lists the agent's
            # tasks (the default for an A2A 1.0 agent that does not push).
            "A2A_LIST_INTERVAL": "0"
            if kind == "poll"
            else os.environ.get("A2A_LIST_INTERVAL", "1"),
        }
    )
    if mode == "distributed":
        recreate_postgres(BENCH_DATABASE_URL)
        env.update(
            {
                "DATABASE_URL": BENCH_DATABASE_URL,
                "REDIS_URL": BENCH_REDIS_URL,
                "CELERY_QUEUE": "long-bench",
                "CHANNELS_PREFIX": "long-bench",
            }
        )
    else:
        env["SQLITE_PATH"] = str(tmp / "db.sqlite3")
    with ExitStack() as stack:
        agent_urls, agent_pids = [], []
        for i in range(agents):
            agent_port = free_port()
            agent_urls.append(f"http://127.0.0.1:{agent_port}")
            args = [PYTHON, "bench/long_agent.py", str(agent_port), "--seconds", str(seconds)]
            agent = Proc(args + (["--push"] if kind == "push" else []), env, log, f"agent{i}")
            stack.callback(agent.stop)
            agent.wait_http(f"{agent_urls[-1]}/health")
            agent_pids.append(agent.popen.pid)
        token = django_script(SETUP.replace("AGENT_URLS", repr(agent_urls)), env)
        port = free_port()
        url = f"http://127.0.0.1:{port}"
        env["PUBLIC_URL"] = url
        procs: list[Proc] = []
        if mode == "embedded":
            serve = [PYTHON, "manage.py", "runplatform", "--no-migrate", "--no-seed"]
            serve += ["--host", "127.0.0.1", "--port", str(port)]
            procs.append(Proc(serve, env, log, "platform"))
            stack.callback(procs[0].stop)
        else:
            daphne = [PYTHON, "-m", "daphne", "-b", "127.0.0.1", "-p", str(port)]
            procs.append(Proc([*daphne, "platform_site.asgi:application"], env, log, "daphne"))
            worker = [PYTHON, "-m", "celery", "-A", "platform_site", "worker", "-P", "threads"]
            worker += ["-c", "8", "--without-heartbeat", "--without-mingle", "--without-gossip"]
            # -l INFO: each says "ready." (the idle window must not see them starting).
            worker += ["-l", "INFO"]
            for n in range(workers):  # each its own process (and GIL); they share the rows
                procs.append(Proc([*worker, "-n", f"w{n}@%h"], env, log, f"worker{n}"))
            beat = [PYTHON, "-m", "celery", "-A", "platform_site", "beat", "-l", "INFO"]
            procs.append(Proc([*beat, "-S", "celery.beat:Scheduler"], env, log, "beat"))
            for proc in procs:
                stack.callback(proc.stop)
            # They share one log: every worker's "ready.", and beat's start.
            procs[1].wait_log("ready.", count=workers)
            procs[-1].wait_log("beat: Starting...")
        procs[0].wait_http(f"{url}/healthz")
        pids = [p.popen.pid for p in procs]
        # What the platform spends with nothing to do (sweeps, beat, idle servers): the
        # cost per task is shown with and without it.
        idle0, idle_t0 = cpu_seconds(pids), time.time()
        time.sleep(IDLE_SECONDS)
        idle_cores = (cpu_seconds(pids) - idle0) / (time.time() - idle_t0)
        cpu0, t0 = cpu_seconds(pids), time.time()
        services0 = services_cpu(mode)
        stages0 = stage_cpu(url)
        samples: list[tuple[float, float, float, float]] = []  # (time, cpu, rss, agent cpu)

        def sample() -> None:
            samples.append((time.time(), cpu_seconds(pids), rss_mib(pids), cpu_seconds(agent_pids)))

        # Sampled every second from the first creation on (a steady run's window is
        # while it creates), and once more after the last count, so that ends that all
        # came within a second still get the agents' CPU while they ended.
        stop = threading.Event()

        def sample_every_second() -> None:
            while True:
                sample()
                if stop.wait(1.0):
                    return

        sampler = threading.Thread(target=sample_every_second, daemon=True)
        sampler.start()
        rate = in_flight / seconds if steady else 0.0
        try:
            created_at = asyncio.run(create(url, token, total, seconds, rate))
            deadline = time.monotonic() + timeout
            final = 0
            count_final = FinalCounter(mode, env)
            stack.callback(count_final.close)
            while time.monotonic() < deadline:
                final = count_final()
                if final >= total:
                    break
                time.sleep(1.0)
        finally:
            stop.set()
            sampler.join()
        sample()
        cpu1, t1 = cpu_seconds(pids), time.time()
        services1 = services_cpu(mode)
        stages1 = stage_cpu(url)
        failed = failed_calls(url)
        saw = agents_saw(agent_urls)
        report = json.loads(django_script(REPORT, env))
    first_end = min(saw.ended.values()) if saw.ended else t1
    # The plateau: all tasks in flight and none ending (a burst), or tasks starting and
    # ending at the same rate (steady: from the first end to the last creation).
    window = (first_end, created_at) if steady else (created_at, first_end)
    plateau = [s for s in samples if window[0] <= s[0] <= window[1]]
    cores = (
        (plateau[-1][1] - plateau[0][1]) / (plateau[-1][0] - plateau[0][0])
        if len(plateau) >= 2 and plateau[-1][0] > plateau[0][0]
        else float("nan")
    )
    # The agent's CPU while its tasks end and it pushes (or is polled) about them: a
    # single-process agent near one core is the bottleneck, not the platform.
    ending = [x for x in samples if x[0] >= first_end and (not steady or x[0] <= created_at)]
    agent_cores = (
        (ending[-1][3] - ending[0][3]) / (ending[-1][0] - ending[0][0])
        if len(ending) >= 2 and ending[-1][0] > ending[0][0]
        else float("nan")
    )
    # A steady run's delays are those of the tasks that ended in its steady window.
    counted = {
        rid: at for rid, at in saw.ended.items() if not steady or window[0] <= at <= window[1]
    }
    delays = [
        max(0.0, report["done"][rid] - at) * 1000
        for rid, at in counted.items()
        if rid in report["done"]
    ]
    delay_by_second = delays_by_second(counted, report["done"], first_end)
    # How long the COMPLETED push waited at the agent before its POST began.
    at_agent = [
        max(0.0, saw.pushed[rid] - at) * 1000 for rid, at in counted.items() if rid in saw.pushed
    ]
    return {
        **poll_split(counted, saw.seen, report["done"]),
        "long_poll_gaps": long_gaps_since(saw.long_gaps, t0),
        "mode": mode,
        "agent": kind,
        "agents": agents,
        "workers": workers if mode == "distributed" else 0,
        "tasks": total,
        "seconds": seconds,
        "in_flight": in_flight,
        "steady": steady,
        "counted": len(counted),
        "completed": sum(1 for rid in saw.ended if rid in report["done"]),
        "final": final,
        "states": report["states"],
        "followedBy": report["followedBy"],
        "create_secs": created_at - t0,
        "plateau_secs": (plateau[-1][0] - plateau[0][0]) if len(plateau) >= 2 else 0.0,
        "cores": cores,
        "agent_cores_ending": agent_cores,
        "rss_mib": max((s[2] for s in plateau), default=rss_mib(pids)),
        "cpu_ms_per_task": (cpu1 - cpu0) / total * 1000,
        "idle_cores": idle_cores,
        "cpu_ms_per_task_net": max(0.0, (cpu1 - cpu0) - idle_cores * (t1 - t0)) / total * 1000,
        # PostgreSQL's and Redis's CPU per task (distributed), not in the platform's figure
        "services": {
            name: (seconds - services0[name]) / total * 1000
            for name, seconds in services1.items()
            if name in services0
        },
        # The platform's threads' CPU per task by stage of work (``a2a_cpu_seconds_total``);
        # the rest of the CPU per task is the event loops (HTTP) and threads no stage covers.
        "stages": {
            name: (seconds - stages0.get(name, 0.0)) / total * 1000
            for name, seconds in sorted(stages1.items())
            if seconds > stages0.get(name, 0.0)
        },
        "failed_calls": failed,
        "sends": saw.counts.get("send", 0) / total,
        "polls": saw.counts.get("get", 0) / total,
        "lists": saw.counts.get("list", 0) / total,
        "requests": sum(saw.counts.values()) / total,
        "pushes": saw.pushes / total,
        "push_failures": saw.push_failures,
        "delay_p50": statistics.median(delays) if delays else float("nan"),
        "delay_p95": percentile(delays, 0.95) if delays else float("nan"),
        "delay_max": max(delays) if delays else float("nan"),
        "noticed": len(delays),
        "delay_by_second": delay_by_second,
        "at_agent_p95": percentile(at_agent, 0.95) if at_agent else float("nan"),
        # The platform's webhook as the agents saw it, for the pushes made while tasks
        # end: each push's wait for one of the agent's slots, then the POST until the
        # platform's answer (ms, p50 / p95).
        "push_wait_ms": quantiles([w for at, w, _ in saw.push_times if at >= first_end]),
        "push_answer_ms": quantiles([a for at, _, a in saw.push_times if at >= first_end]),
        "log": str(log),
        "load": os.getloadavg()[0],
        "at": time.time(),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, nargs="+", default=[2000])
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument(
        "--agent", nargs="+", choices=["push", "poll", "list"], default=["push", "poll", "list"]
    )
    parser.add_argument(
        "--mode", nargs="+", choices=["embedded", "distributed"], default=["embedded"]
    )
    parser.add_argument("--timeout", type=float, default=900.0)
    parser.add_argument(
        "--agents", type=int, default=1, help="agent processes (each registered as an agent)"
    )
    parser.add_argument(
        "--workers", type=int, default=1, help="distributed: Celery worker processes"
    )
    parser.add_argument(
        "--steady",
        action="store_true",
        help="keep --tasks in flight: create twice as many at --tasks / --seconds a second",
    )
    parser.add_argument("--write", action="store_true")
    parser.add_argument("--save", default="", help="append each run's result (JSON line) here")
    parser.add_argument(
        "--load", nargs="+", default=[], help="run nothing: tabulate the results saved in these"
    )
    parser.add_argument("--analysis", default="", help="a file: a new reading after the table")
    args = parser.parse_args()
    results = [
        json.loads(line)
        for name in args.load
        for line in Path(name).read_text().splitlines()
        if line.strip()
    ]
    for mode in args.mode if not args.load else []:
        for kind in args.agent:
            for total in args.tasks:
                result = run(
                    mode,
                    kind,
                    total,
                    args.seconds,
                    args.timeout,
                    args.agents,
                    args.steady,
                    args.workers,
                )
                print(json.dumps(result, indent=1), flush=True)
                if args.save:  # several invocations can make one table (--load)
                    with open(args.save, "a") as saved:
                        saved.write(json.dumps(result) + "\n")
                results.append(result)
    section = table(results)
    print(section)
    if args.write:
        # The reading is written by hand (the runs of a table are made apart): without a
        # new one, the one in the document stays.
        reading = Path(args.analysis).read_text() if args.analysis else kept_reading("long_tasks")
        body = f"## Long tasks in flight\n\n{section}\n\n{READING_MARK}\n{reading.strip()}"
        write_section("long_tasks", body)


if __name__ == "__main__":
    sys.exit(main())
