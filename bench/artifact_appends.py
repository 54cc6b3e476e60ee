"""Benchmark: what an agent's appended artifact chunk costs as the task's artifacts grow.

    .venv/bin/python bench/artifact_appends.py [--chunk 4000] [--total 4000000]
        [--mode sqlite|postgres|both] [--write]

An agent that streams its output in chunks pushes one ``artifactUpdate`` (``append``) per
chunk to the platform's webhook, and every push rewrites the task's whole artifacts in its
row (read, merge, size check against ``TASK_ARTIFACTS_MAX_BYTES``, write): the cost of a
chunk grows with what came before it, and the cost of the whole output with its square.
This measures it through the real ASGI application in one process (httpx's ASGI
transport, the webhook's database threads), one task, ``--chunk`` characters per push
until the artifacts hold ``--total``: wall time and this process's CPU per push around
each size. SQLite is a temporary file; PostgreSQL is ``BENCH_DATABASE_URL`` (recreated).
``--write`` replaces this benchmark's section of docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
from datetime import date
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from procs import BASE_DIR, BENCH_DATABASE_URL, PYTHON, recreate_postgres
from report import write_section

MARKS_MB = (0.5, 1.0, 2.0, 4.0)
WINDOW = 20  # pushes measured up to each mark

ANALYSIS = """\
**Reading.** Each appended chunk costs in proportion to the artifacts already held, not
to the chunk: the webhook reads the task (its artifacts decoded), merges the chunk, sizes
the result for the cap (one JSON encoding), writes it back (another) and the database
rewrites the row. The CPU column is the platform's process; on PostgreSQL the server's
own work is in the wall time beside it. So an output streamed in N chunks costs about
N²/2 chunk sizes of work: 4 MB in 1,000 chunks took the platform about a minute, and
at the default `TASK_ARTIFACTS_MAX_BYTES` (10 MB, the size of one agent answer) the worst
case is several minutes of one push thread for one task. The cap is what bounds it; an
operator whose agents stream large outputs in small chunks should lower it, and an agent
should send few large chunks rather than many small ones. A whole answer of the same size
(one poll, one pushed Task) is one such write, and a stream's chunks are written at most
every `A2A_STREAM_APPLY_INTERVAL` (0.5 s), each write carrying all held back since: this
cost is the pushes'. A chunk table (each chunk its own row,
folded into the task when it ends) would make an append cost its own size; it is not
built: every reader of a task (the tasks API, the face, the task page, output
validation) reads its artifacts from the task's row."""


def child(mode: str, chunk: int, total: int) -> None:
    """Run in a fresh process (settings are read once): print one JSON line per mark."""
    tmp = tempfile.mkdtemp(prefix="bench-appends-")
    os.environ.pop("DATABASE_URL", None)
    os.environ.pop("REDIS_URL", None)
    if mode == "postgres":
        recreate_postgres(BENCH_DATABASE_URL)
        os.environ["DATABASE_URL"] = BENCH_DATABASE_URL
    else:
        os.environ["SQLITE_PATH"] = f"{tmp}/db.sqlite3"
    os.environ.update(
        DJANGO_SETTINGS_MODULE="platform_site.settings",
        LOG_LEVEL="WARNING",
        TASK_ARTIFACTS_MAX_BYTES=str(total * 2),
    )
    sys.path.insert(0, str(BASE_DIR))
    import django

    django.setup()
    import httpx
    from django.contrib.auth import get_user_model
    from django.core.management import call_command

    from a2a import agent_push_tokens, creation
    from a2a.models import Task
    from agent_profiles.models import AgentProfile, Skill
    from platform_site.asgi import application

    call_command("migrate", interactive=False, verbosity=0)
    skill = Skill.objects.create(id="s", name="s", domain="d")
    agent = AgentProfile.objects.create(id="a", name="A", a2a_endpoint="http://127.0.0.1:9/")
    agent.skills.set([skill])
    user = get_user_model().objects.create_user(username="bench")
    task = creation.create_task(skill_id="s", input={}, user=user)
    Task.objects.filter(pk=task.pk).update(attempts=1, remote_task_id="r")
    path = f"/api/a2a/push/{task.pk}/{task.agent_id}/1"
    headers = {"X-A2A-Notification-Token": agent_push_tokens.token_for(task.pk, task.agent_id, 1)}
    pushes = total // chunk
    marks = {max(WINDOW, int(mb * 1e6) // chunk): mb for mb in MARKS_MB if mb * 1e6 <= total}

    async def run() -> None:
        transport = httpx.ASGITransport(app=application)
        async with httpx.AsyncClient(transport=transport, base_url="http://bench") as client:
            started = time.perf_counter()
            cpu = time.process_time()
            for i in range(1, pushes + 1):
                if i + WINDOW - 1 in marks:
                    wall_at, cpu_at = time.perf_counter(), time.process_time()
                artifact = {"artifactId": "out", "parts": [{"text": "x" * chunk}]}
                update = {"taskId": "r", "append": i > 1, "artifact": artifact}
                body = json.dumps({"artifactUpdate": update})
                answer = await client.post(path, content=body, headers=headers)
                if answer.status_code != 200:
                    raise RuntimeError(f"push {i}: {answer.status_code} {answer.text[:300]}")
                if i in marks:
                    print(
                        json.dumps(
                            {
                                "mode": mode,
                                "mb": marks[i],
                                "wall_ms": (time.perf_counter() - wall_at) / WINDOW * 1000,
                                "cpu_ms": (time.process_time() - cpu_at) / WINDOW * 1000,
                            }
                        ),
                        flush=True,
                    )
            print(
                json.dumps(
                    {
                        "mode": mode,
                        "whole": True,
                        "pushes": pushes,
                        "wall_s": time.perf_counter() - started,
                        "cpu_s": time.process_time() - cpu,
                    }
                ),
                flush=True,
            )

    asyncio.run(run())


def table(rows: list[dict[str, Any]], chunk: int, total: int) -> str:
    modes = sorted({r["mode"] for r in rows}, reverse=True)  # sqlite first
    lines = [
        f"`bench/artifact_appends.py` — one task, {chunk:,}-character chunks appended by "
        f"pushes to the webhook until its artifacts hold {total / 1e6:g} MB, on this machine "
        f"({os.cpu_count()} CPUs), {date.today().isoformat()}.",
        "",
        "| Database | Artifacts held | Wall ms per push | CPU ms per push |",
        "| --- | ---: | ---: | ---: |",
    ]
    for mode in modes:
        for r in sorted(
            (r for r in rows if r["mode"] == mode and "mb" in r), key=lambda r: r["mb"]
        ):
            lines.append(f"| {mode} | {r['mb']:g} MB | {r['wall_ms']:.1f} | {r['cpu_ms']:.1f} |")
    lines.append("")
    for r in rows:
        if r.get("whole"):
            lines.append(
                f"- {r['mode']}: the whole output, {r['pushes']:,} pushes: "
                f"{r['wall_s']:.1f} s, {r['cpu_s']:.1f} s of CPU."
            )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chunk", type=int, default=4000)
    parser.add_argument("--total", type=int, default=4_000_000)
    parser.add_argument("--mode", choices=["sqlite", "postgres", "both"], default="both")
    parser.add_argument("--write", action="store_true")
    parser.add_argument("--child", choices=["sqlite", "postgres"])
    args = parser.parse_args()
    if args.child:
        child(args.child, args.chunk, args.total)
        return
    rows: list[dict[str, Any]] = []
    for mode in ("sqlite", "postgres") if args.mode == "both" else (args.mode,):
        argv = [PYTHON, __file__, "--child", mode, "--chunk", str(args.chunk)]
        out = subprocess.run(
            [*argv, "--total", str(args.total)], capture_output=True, text=True, cwd=BASE_DIR
        )
        if out.returncode:
            raise SystemExit(out.stderr[-3000:])
        rows += [json.loads(line) for line in out.stdout.splitlines() if line.startswith("{")]
    body = table(rows, args.chunk, args.total) + "\n\n" + ANALYSIS
    print(body)
    if args.write:
        write_section("artifact_appends", "## Appended artifact chunks\n\n" + body)


if __name__ == "__main__":
    main()
