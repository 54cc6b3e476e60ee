"""The report of ``bench/gateway.py``: its table and the reading that follows it, the
section of docs/benchmarks.md between ``<!-- bench:gateway -->`` markers."""

from __future__ import annotations

import os
import time
from typing import Any


def section(results: list[dict[str, Any]]) -> str:
    """The section of docs/benchmarks.md for ``results``."""
    lines = [
        "## Agent gateway (`bench/gateway.py`)",
        "",
        f"One platform process per mode, loopback, {os.cpu_count()} CPUs running nothing but "
        "the benchmark; socket-only agents (no HTTP endpoint) as `websockets` sockets "
        "in the bench process; `POST /api/tasks` from 1 or more concurrent clients "
        "(*posters*), one task per agent. Embedded: `runplatform` (SQLite, in-memory "
        "channel layer, in-process worker); distributed: one daphne on PostgreSQL + Redis. "
        "Measured "
        f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}.",
        "",
        "| mode | posters | sockets | connect rate | RSS before → after | per connection "
        "| `POST` → `task.assign` p50 / p99 / max | `201` → frame p50 / p99 | creations/s "
        "| ack round trip p50 / p99 | load avg |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in results:
        note = "" if r["all_connected"] and r["all_delivered"] else " (incomplete)"
        lines.append(
            f"| {r['mode']} | {r['posters']} | {r['n']:,}{note} | {r['connect_rate']:.0f}/s | "
            f"{r['rss_before_mib']:.0f} → {r['rss_after_mib']:.0f} MiB | "
            f"{r['kib_per_conn']:.0f} KiB | "
            f"{r['p50']:.1f} / {r['p99']:.1f} / {r['max']:.1f} ms | "
            f"{r['after_201_p50']:.1f} / {r['after_201_p99']:.1f} ms | "
            f"{r['create_rate']:.0f} | {r['ack_p50']:.1f} / {r['ack_p99']:.1f} ms | "
            f"{r['load']:.1f} |"
        )
    lines += [
        "",
        "Connect rate counts until every socket has its presence row (handshake, key check, "
        "group join, presence insert). Latency runs from sending `POST /api/tasks` to the "
        "frame in the agent's socket. Load avg is the machine's 1-minute load during the run.",
        "",
        GATEWAY_ANALYSIS.strip(),
    ]
    return "\n".join(lines)


GATEWAY_ANALYSIS = """
**Reading.** A task for an agent without an HTTP endpoint is assigned in the creation
transaction (`gateway.services.assign_new_tasks`, registered with `a2a.creation` at
start): the `task.assign` delivery row is saved with the task, and on commit the request
thread hands the frame to the agent's group, before the `201` is written. What remains
between the `201` and the frame is the consumer claiming the row (one conditional UPDATE,
so with several connections exactly one sends it) and writing to the socket: a few ms at
the median in both modes. The aim (p99 < 100 ms from `POST` to frame) is met in both
modes with one client and with two posting at once. The embedded mode met it with two
clients only after two fixes found by profiling its process during this run: Channels'
in-memory channel layer looked for expired messages in every channel and group (1,000 of
each) at every message, a quarter of the event loop's time, and now looks once a second
(`platform_site.memory_layer`); and the consumer's database calls (Channels'
`database_sync_to_async`) opened and closed a SQLite connection around every key check,
claim and ack, and now run on the gateway's own threads, which keep theirs
(`GATEWAY_DB_THREADS`). Together: embedded p99 with two clients 171-179 -> 67-73 ms
(three runs), with one 76 -> 33 ms, creations 46-51 -> 70-95/s, connect rate 112-129 ->
210-263/s. The max (260-360 ms) is the first request of a run (cold caches). Before the
hand-off moved into the creation transaction, the task waited for a worker's Celery
message and an HTTP attempt: p50 2.1 s, p99 2.4 s from `POST` to frame. A named agent is
read alone at creation, not with every agent offering the skill (1,000 here), which took
the distributed p99 with 4 clients from 1.0 s to 0.43 s. One process holds 1,000 sockets
at about 45 KiB each. Run again embedded on 2026-12-04 (04:05 UTC), after the process's
SQLite writers began to queue on a lock (performance-history.md, Dispatch, the fourteenth
round), to check that the consumer's claims do not wait behind the worker's writes: p99
27.3 ms with one client and 52.5 ms with two (p50 11.6 / 26.2 ms, 86-87 creations/s),
within the table's.
"""
