"""The report of ``bench/long_tasks.py``: its table of runs, and the parts of the notice delays."""

from __future__ import annotations

import os
import statistics
import time
from typing import Any

from procs import percentile


def quantiles(values: list[float], *, with_max: bool = False) -> list[float] | None:
    """[p50, p95] of ``values`` (and the max with ``with_max``); None when empty."""
    if not values:
        return None
    found = [statistics.median(values), percentile(values, 0.95)]
    return [*found, max(values)] if with_max else found


def poll_split(
    ended: dict[str, float], seen: dict[str, list[float | None]], done: dict[str, float]
) -> dict[str, Any]:
    """A polled task's notice delay in parts (ms, p50 / p95 / max): ``poll_wait`` from its
    end to the poll that found it ended, ``poll_gap`` between that poll and the one
    before, ``after_poll`` from that poll to the platform's COMPLETED; and the parts of
    the ten most delayed tasks. Empty when nothing was polled after its end."""
    rows = []
    for rid, end in ended.items():
        if rid not in seen or rid not in done:
            continue
        polled, before = seen[rid]
        assert polled is not None
        gap = (polled - before) * 1000 if before is not None else float("nan")
        delay, wait, after = done[rid] - end, polled - end, done[rid] - polled
        rows.append((delay * 1000, wait * 1000, gap, after * 1000))
    if not rows:
        return {}
    worst = sorted(rows, reverse=True)[:10]
    return {
        "poll_wait_ms": quantiles([r[1] for r in rows], with_max=True),
        "poll_gap_ms": quantiles([r[2] for r in rows if r[2] == r[2]], with_max=True),
        "after_poll_ms": quantiles([r[3] for r in rows], with_max=True),
        "worst_split_ms": [[round(x) if x == x else None for x in r] for r in worst],
    }


def long_gaps_since(gaps: list[list[float]], start: float) -> dict[str, Any]:
    """The agents' long gaps between two polls of a task (see ``bench/long_agent.py``):
    how many, the longest (s), and when each ended, in seconds since the run began."""
    return {
        "count": len(gaps),
        "max_s": max((gap for _, gap in gaps), default=0.0),
        "at_s": sorted(round(at - start, 1) for at, _ in gaps),
    }


def delays_by_second(
    ended: dict[str, float], done: dict[str, float], first_end: float
) -> list[list[float]]:
    """When in a run the late notices were: per second of the agents' ends (from the
    first), the tasks that ended then and their notice delays' p95 and max (ms)."""
    by_second: dict[int, list[float]] = {}
    for rid, at in ended.items():
        if rid in done:
            by_second.setdefault(int(at - first_end), []).append(max(0.0, done[rid] - at) * 1000)
    return [
        [second, len(got), percentile(got, 0.95), max(got)]
        for second, got in sorted(by_second.items())
    ]


def table(results: list[dict[str, Any]]) -> str:
    load = max((r.get("load", 0.0) for r in results), default=os.getloadavg()[0])
    at = max((r.get("at", 0.0) for r in results), default=0.0) or time.time()
    lines = [
        f"`bench/long_tasks.py` on this machine ({os.cpu_count()} CPUs running nothing but "
        f"the benchmark: load average at most {load:.1f} at the end of a run), "
        f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime(at))}. `bench/long_agent.py` "
        'agents (a2a-sdk), one process each ("x N": N agents sharing the tasks); every '
        "task works for the given seconds at its agent.",
        "",
        "| Mode | Agent | Tasks x s | Followed by | Platform cores (plateau) | RSS MiB "
        "| CPU ms/task (beyond idle) | Agent requests/task (sends + polls + listings) "
        "| Pushes/task "
        "| Agent cores while tasks end | Notice delay p50 / p95 / max "
        "| of which at the agent, p95 | Done |",
        "| --- | --- | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in results:
        follow = ", ".join(f"{k} {v}" for k, v in r["followedBy"].items())
        agent_cores = r.get("agent_cores_ending", float("nan"))
        agent = "—" if agent_cores != agent_cores else f"{agent_cores:.2f}"  # NaN: not measured
        waited = r.get("at_agent_p95", float("nan"))
        at_agent = "—" if waited != waited else f"{waited / 1000:.2f} s"
        agents = f" x {r['agents']}" if r.get("agents", 1) > 1 else ""
        net = f" ({r['cpu_ms_per_task_net']:.1f})" if "cpu_ms_per_task_net" in r else ""
        done = r.get("completed", r["noticed"])
        mode = r["mode"] + (f" ({r['workers']} workers)" if r.get("workers", 1) > 1 else "")
        lines.append(
            f"| {mode} | {r['agent']}{agents} | {_tasks(r)} | {follow} "
            f"| {r['cores']:.2f} | {r['rss_mib']:.0f} | {r['cpu_ms_per_task']:.1f}{net} "
            f"| {r['requests']:.2f} ({r['sends']:.2f} + {r['polls']:.2f} "
            f"+ {r.get('lists', 0):.2f}) "
            f"| {r['pushes']:.2f} | {agent} "
            f"| {r['delay_p50'] / 1000:.2f} / {r['delay_p95'] / 1000:.2f} / "
            f"{r['delay_max'] / 1000:.2f} s | {at_agent} | {done:,}/{r['tasks']:,} |"
        )
    served = [r for r in results if r.get("services")]
    if served:
        lines += ["", "CPU ms per task of the services (distributed; not in the table):"]
    for r in served:
        parts = ", ".join(f"{name} {ms:.1f}" for name, ms in r["services"].items())
        lines.append(f"- {r['agent']}, {r['tasks']:,} tasks: {parts}.")
    return "\n".join(lines)


def _tasks(r: dict[str, Any]) -> str:
    """``N x s``; a steady run's N is what it keeps in flight (it creates twice as many)."""
    if r.get("steady"):
        return f"{r['in_flight']:,} x {r['seconds']:g}, steady ({r['tasks']:,} created)"
    return f"{r['tasks']:,} x {r['seconds']:g}"
