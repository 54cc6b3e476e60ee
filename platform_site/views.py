"""Probes for process managers and load balancers.

``/healthz``: the process is up and serving (touches nothing else).
``/readyz``: the process can do work: the database answers and is fully migrated and, in
the distributed mode, the Redis broker (also the channel layer) answers. 503 with the
failing checks otherwise; a check that does not answer within PROBE_TIMEOUT fails as a
timeout. A failure names the check and the kind of error, never its text (which would
tell anonymous callers the database's host and port): that goes to the log.
"""

from __future__ import annotations

import logging
import sys
import time
from typing import Any

import redis
from django.conf import settings
from django.core.exceptions import DisallowedHost
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views import defaults
from django.views.decorators.http import require_safe

from platform_site.db_bounds import PROBE_TIMEOUT, ProbeTimeout, in_thread
from platform_site.errors import RETRY_AFTER_SECONDS, error_body, outage_error

log = logging.getLogger(__name__)


class NotReady(RuntimeError):
    """A probe's own finding, safe to show to anyone (no hosts, ports or credentials)."""


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
    except (NotReady, ProbeTimeout) as exc:
        return {"ok": False, "error": str(exc)}
    except Exception as exc:  # a probe reports every failure, it never raises
        log.warning("readyz: %s failed: %s: %s", probe.__name__.strip("_"), type(exc).__name__, exc)
        return {"ok": False, "error": f"{type(exc).__name__} (details in the server log)"}
    return {"ok": True, "detail": detail, "ms": round((time.monotonic() - started) * 1000, 1)}


def _database() -> str:
    # On a thread of its own: a database that accepts the connection and then says nothing
    # (a stopped server) held the probe, and the load balancer's, for ever.
    return in_thread("database", _select_one)


def _select_one() -> str:
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
            raise NotReady(f"{len(pending)} unapplied migrations ({names}): run migrate")
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


# --- error pages -------------------------------------------------------------------------
# Django renders errors raised outside DRF's views (no URL matched, a middleware or a
# session save failed, the database went down mid-request) with these. Under /api/ they
# answer in the platform error shape (an outage as 503 + Retry-After); elsewhere (the
# admin, the landing page) Django's own pages.

API_PREFIX = "/api/"


def _is_api(request: HttpRequest) -> bool:
    return request.path.startswith(API_PREFIX)


def _api_error(code: str, message: str, status: int, details: Any = None) -> JsonResponse:
    return JsonResponse(error_body(code, message, details), status=status)


def not_found(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    if not _is_api(request):
        return defaults.page_not_found(request, exception)  # type: ignore[arg-type]
    return _api_error("not_found", f"No API route or object at {request.path}.", 404)


def bad_request(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    if not _is_api(request):
        return defaults.bad_request(request, exception)  # type: ignore[arg-type]
    message = str(exception) if isinstance(exception, DisallowedHost) else "Bad request."
    return _api_error("bad_request", message, 400)


def permission_denied(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    if not _is_api(request):
        return defaults.permission_denied(request, exception)  # type: ignore[arg-type]
    return _api_error("forbidden", str(exception or "") or "Forbidden.", 403)


def server_error(request: HttpRequest) -> HttpResponse:
    # Called inside Django's ``except`` block, so the exception is at hand.
    exc = sys.exc_info()[1]
    outage = outage_error(exc) if exc is not None else None
    if not _is_api(request):
        if outage is not None:
            response = HttpResponse(outage.message, status=503, content_type="text/plain")
            response["Retry-After"] = str(RETRY_AFTER_SECONDS)
            return response
        return defaults.server_error(request)
    if outage is not None:
        response = _api_error(outage.code, outage.message, 503, outage.details)
        response["Retry-After"] = str(RETRY_AFTER_SECONDS)
        return response
    return _api_error("internal_error", "The platform failed to answer; it was logged.", 500)
