"""Prometheus metrics: defined once here, updated by the apps at their seams, served at
``/metrics`` (see docs/operations.md for each metric).

Several processes (daphne, celery workers) share one view of the counters through
prometheus-client's multi-process mode: set ``PROMETHEUS_MULTIPROC_DIR`` to the same empty
directory for every process of one host (wipe it when they all restart). Without it each
process serves its own counters (the embedded mode is one process anyway).

Gauges that are facts about the database (tasks by state, offline queue depth, sweep lag)
are not counted in memory: the apps register scrape-time collectors
(:func:`add_scrape_collector`) that read them when ``/metrics`` is scraped, so every
process answers the same.
"""

from __future__ import annotations

import hmac
import logging
import os
import threading
import time
from collections.abc import Callable, Iterable
from contextlib import ContextDecorator
from typing import Any

from django.conf import settings
from django.db import DatabaseError
from django.http import HttpRequest, HttpResponse
from prometheus_client import (
    CONTENT_TYPE_LATEST,
    REGISTRY,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
)
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from platform_site.db_bounds import statement_timeout

log = logging.getLogger(__name__)

MULTIPROC_DIR = os.environ.get("PROMETHEUS_MULTIPROC_DIR", "")

TASK_BUCKETS = (0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 900, 3600)
CALL_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30)

# --- Tasks ------------------------------------------------------------------------------
TASKS_CREATED = Counter(
    "a2a_tasks_created_total", "Platform tasks created.", ["skill", "agent", "origin"]
)
TASKS_ENDED = Counter(
    "a2a_tasks_ended_total",
    "Platform tasks that reached a final state.",
    ["skill", "agent", "state", "error_code"],
)
TASK_DURATION = Histogram(
    "a2a_task_duration_seconds",
    "Seconds from creation to the final state.",
    ["skill", "state"],
    buckets=TASK_BUCKETS,
)
TASK_TRANSITIONS = Counter(
    "a2a_task_transitions_total", "Task state transitions, by the state entered.", ["state"]
)
TASKS_PRUNED = Counter("a2a_tasks_pruned_total", "Ended tasks deleted past TASK_RETENTION_DAYS.")

# --- Calls to agents and what they tell us ----------------------------------------------
AGENT_CALLS = Counter(
    "a2a_agent_calls_total",
    "Calls to agents, by outcome (ok or an error code).",
    ["agent", "binding", "operation", "outcome"],
)
AGENT_CALL_SECONDS = Histogram(
    "a2a_agent_call_duration_seconds",
    "Latency of calls to agents.",
    ["agent", "binding", "operation"],
    buckets=CALL_BUCKETS,
)
AGENT_UPDATES = Counter(
    "a2a_agent_updates_total",
    "Task updates received from agents: a poll's or a send's answer (a2a), a push webhook "
    "(push), an agent's listing (list), a gateway frame (websocket).",
    ["via"],
)

# --- Long calls (a2a.long_calls) --------------------------------------------------------
LONG_CALLS = Gauge(
    "a2a_long_calls",
    "Long calls to agents running on threads of their own (streams followed to their end, "
    "blocking sends, held sends).",
    multiprocess_mode="livesum",
)
LONG_CALLS_WAITED = Counter(
    "a2a_long_calls_waited_total",
    "Long calls left due again for want of room (A2A_LONG_CALLS, A2A_LONG_CALLS_PER_AGENT).",
)

# --- Gateway ----------------------------------------------------------------------------
GATEWAY_SOCKETS = Gauge(
    "a2a_gateway_sockets",
    "Open agent WebSocket connections.",
    multiprocess_mode="livesum",
)
GATEWAY_CONNECTIONS = Counter(
    "a2a_gateway_connections_total", "Agent WebSocket connections, by outcome.", ["outcome"]
)
GATEWAY_DELIVERIES = Counter(
    "a2a_gateway_deliveries_total",
    "Frames handed to the gateway for agents (assign, message, cancel), by how they left: "
    "sent to a live socket or queued offline.",
    ["kind", "outcome"],
)

# --- The A2A face -----------------------------------------------------------------------
AGENT_PUSHES = Counter(
    "a2a_agent_pushes_total",
    "Bodies agents pushed to the platform's webhook, by result: applied, read_back (a "
    "COMPLETED without artifacts, read back with GetTask) or the refusal's error code.",
    ["result"],
)

FACE_REQUESTS = Counter(
    "a2a_face_requests_total",
    "Requests to the platform's A2A face, by operation and HTTP status.",
    ["operation", "status"],
)

# --- Where the CPU goes ---------------------------------------------------------------
CPU_SECONDS = Counter(
    "a2a_cpu_seconds_total",
    "CPU seconds of the platform's threads, by the stage of work they ran (tasks-api, "
    "a2a-face, agent-push, gateway, worker, sweep, poll). The rest of a process's CPU is "
    "its event loop (HTTP, WebSockets) and threads no stage covers.",
    ["stage"],
)
_stage = threading.local()


class cpu_stage(ContextDecorator):  # lower case: used like a function, `with` or `@`
    """Count this thread's CPU time inside the block (or decorated function) under
    ``stage`` in ``a2a_cpu_seconds_total``.

    Thread CPU time, so time spent waiting (for an agent, a lock, the GIL) is not counted
    and concurrent threads do not count each other's work. A stage entered inside another
    on the same thread counts to the outer one: nothing is counted twice. One instance may
    be shared by threads (what it measures is kept per thread); it costs a few
    microseconds per use.
    """

    def __init__(self, stage: str) -> None:
        self.stage = stage
        self._counter: Any = None  # the labelled counter, looked up once

    def __enter__(self) -> None:
        depth = getattr(_stage, "depth", 0)
        if depth == 0:
            _stage.started = time.thread_time()
        _stage.depth = depth + 1

    def __exit__(self, *exc: object) -> None:
        _stage.depth -= 1
        if _stage.depth == 0:
            if self._counter is None:
                self._counter = CPU_SECONDS.labels(self.stage)
            self._counter.inc(time.thread_time() - _stage.started)


_scrape_collectors: list[Callable[[], Iterable[Metric]]] = []


def add_scrape_collector(collect: Callable[[], Iterable[Metric]]) -> None:
    """Read ``collect()`` at every scrape (database facts); apps register at start."""
    if collect not in _scrape_collectors:
        _scrape_collectors.append(collect)


class _ScrapeTime(Collector):
    """The scrape-time gauges, and ``a2a_database_up``: 0 when the database could not be
    read (down, or a statement slower than PROBE_TIMEOUT), its gauges then left out.

    A database outage used to turn the whole page into a 503: every counter of the
    process went missing exactly when an operator needed them.
    """

    def collect(self) -> Iterable[Metric]:
        gathered: list[Metric] = []
        up = 1
        for collect in list(_scrape_collectors):
            try:
                with statement_timeout():
                    gathered.extend(collect())  # all or none of one collector's gauges
            except DatabaseError as exc:
                log.warning("metrics: database gauges skipped: %s: %s", type(exc).__name__, exc)
                up = 0
                break  # the next collector would wait for the same database again
        yield from gathered
        yield GaugeMetricFamily(
            "a2a_database_up",
            "1 when this scrape read the database's gauges, 0 when it could not (they are "
            "left out).",
            value=up,
        )


def render() -> bytes:
    """The metrics text: every process's counters (multi-process mode) or this process's,
    plus the scrape-time gauges."""
    if MULTIPROC_DIR:
        from prometheus_client import multiprocess

        registry = CollectorRegistry()
        multiprocess.MultiProcessCollector(registry, path=MULTIPROC_DIR)
    else:
        registry = REGISTRY
    scrape = CollectorRegistry()
    scrape.register(_ScrapeTime())
    return generate_latest(registry) + generate_latest(scrape)


LOOPBACK = {"127.0.0.1", "::1", "::ffff:127.0.0.1"}


def allowed(request: HttpRequest) -> bool:
    """Loopback callers, or ``Authorization: Bearer <METRICS_TOKEN>`` when it is set. A
    request a proxy forwarded (X-Forwarded-For) is not a loopback caller."""
    token = settings.METRICS_TOKEN
    header = request.headers.get("Authorization", "")
    if token and hmac.compare_digest(header.encode(), f"Bearer {token}".encode()):
        return True
    forwarded = "X-Forwarded-For" in request.headers or "Forwarded" in request.headers
    return request.META.get("REMOTE_ADDR") in LOOPBACK and not forwarded


def metrics_view(request: HttpRequest) -> HttpResponse:
    if request.method not in ("GET", "HEAD"):
        return HttpResponse(status=405, headers={"Allow": "GET, HEAD"})
    if not allowed(request):
        return HttpResponse(
            "metrics: loopback callers only, or Authorization: Bearer <METRICS_TOKEN>\n",
            status=403,
            content_type="text/plain",
        )
    return HttpResponse(render(), content_type=CONTENT_TYPE_LATEST)
