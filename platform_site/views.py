"""Probes for process managers and load balancers.

``/healthz``: the process is up and serving (touches nothing else).
``/readyz``: the process can do work: the database answers and is fully migrated and, in
the distributed mode, the Redis broker (also the channel layer) answers. 503 with the
failing checks otherwise.
"""

from __future__ import annotations

import time
from typing import Any

import redis
from django.conf import settings
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.http import HttpRequest, JsonResponse
from django.views.decorators.http import require_safe

PROBE_TIMEOUT = 2.0  # seconds per dependency


@require_safe
def healthz(request: HttpRequest) -> JsonResponse:
    return JsonResponse({"status": "ok"})


@require_safe
def readyz(request: HttpRequest) -> JsonResponse:
    checks = {"database": _check(_database)}
    if checks["database"]["ok"]:
        checks["migrations"] = _check(_migrations)
    if settings.DISTRIBUTED:
        checks["broker"] = _check(_redis)
    else:
        checks["broker"] = {"ok": True, "detail": "memory broker (embedded mode)"}
    ready = all(c["ok"] for c in checks.values())
    body = {"status": "ok" if ready else "unavailable", "checks": checks}
    return JsonResponse(body, status=200 if ready else 503)


def _check(probe: Any) -> dict[str, Any]:
    started = time.monotonic()
    try:
        detail = probe()
    except Exception as exc:  # a probe reports every failure, it never raises
        return {"ok": False, "error": f"{type(exc).__name__}: {exc}"}
    return {"ok": True, "detail": detail, "ms": round((time.monotonic() - started) * 1000, 1)}


def _database() -> str:
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")
        cursor.fetchone()
    return connection.vendor


_migrated = False  # once every migration is applied, stop re-reading the migration graph


def _migrations() -> str:
    global _migrated
    if not _migrated:
        executor = MigrationExecutor(connection)
        pending = executor.migration_plan(executor.loader.graph.leaf_nodes())
        if pending:
            names = ", ".join(f"{m.app_label}.{m.name}" for m, _ in pending[:5])
            raise RuntimeError(f"{len(pending)} unapplied migrations ({names}): run migrate")
        _migrated = True
    return "all applied"


def _redis() -> str:
    client = redis.Redis.from_url(
        settings.REDIS_URL, socket_connect_timeout=PROBE_TIMEOUT, socket_timeout=PROBE_TIMEOUT
    )
    try:
        client.ping()
    finally:
        client.close()
    return "redis"
