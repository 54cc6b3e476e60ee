"""Webhook POSTs on threads of their own: a bounded number per process, and per host.

A push notification is a POST to a client's webhook, which may take up to
``A2A_PUSH_TIMEOUT`` to fail (longer when it trickles bytes). Made on the Celery worker's
threads, the ones that also poll agents and start tasks, twelve sends of one client with
webhooks that never answer stalled every other task's polls for minutes (embedded: four
threads). So a delivery is handed here (:func:`hand`): at most ``A2A_PUSH_THREADS`` POSTs
at once in the process, and ``A2A_PUSH_PER_HOST`` to one webhook host, so that a hung
host holds that many threads and never the others' pushes. A delivery that finds no room
waits in its row, still due, and each POST that ends takes up the next due ones there is
room for (:func:`_take_up`); the beat sweep re-queues any left overdue, so a crash or a
lost message only delays a push.
"""

from __future__ import annotations

import logging
import threading
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from typing import Any
from urllib.parse import urlsplit

from django.conf import settings
from django.db import connections
from django.db.models import Exists, OuterRef
from django.utils import timezone

from a2a.models import DeliveryStatus, PushDelivery
from platform_site.dbthreads import tidy_connections

log = logging.getLogger(__name__)

TAKE_UP = 100  # due deliveries looked at when a POST ends (those of full hosts are passed)

_lock = threading.Lock()
_running: Counter[str] = Counter()  # POSTs under way in this process, per webhook host
_executor: ThreadPoolExecutor | None = None


def hand(delivery_id: int, url: str | None = None) -> bool:
    """Start the delivery's attempt on a push thread; False when there is no room (for
    its host, or at all): it stays due, and a POST that ends takes it up (or the sweep)."""
    if url is None:
        rows = PushDelivery.objects.filter(pk=delivery_id)
        url = rows.values_list("config__url", flat=True).first()
    if url is None:
        return False
    host = _host(url)
    if not _reserve(host):
        return False
    _pool().submit(_run, delivery_id, host)
    return True


def running() -> int:
    """POSTs under way in this process (tests, metrics)."""
    with _lock:
        return sum(_running.values())


def _host(url: str) -> str:
    try:
        return (urlsplit(url).hostname or "").lower()
    except ValueError:
        return ""


def _threads() -> int:
    return max(1, settings.A2A_PUSH_THREADS)


def _reserve(host: str) -> bool:
    with _lock:
        if sum(_running.values()) >= _threads():
            return False
        if _running[host] >= max(1, settings.A2A_PUSH_PER_HOST):
            return False
        _running[host] += 1
        return True


def _release(host: str) -> None:
    with _lock:
        _running[host] -= 1
        if _running[host] <= 0:
            del _running[host]


def _pool() -> ThreadPoolExecutor:
    global _executor
    with _lock:
        if _executor is None:
            _executor = ThreadPoolExecutor(max_workers=_threads(), thread_name_prefix="a2a-push")
        return _executor


def _run(delivery_id: int, host: str) -> None:
    from a2a.face.push import attempt  # push hands its deliveries here

    try:
        tidy_connections()
        attempt(delivery_id)
    except Exception:
        log.exception("push delivery %s: the attempt failed", delivery_id)
    finally:
        _release(host)
    try:
        _take_up()
    except Exception:
        log.exception("could not take up the next push deliveries")
    finally:
        # Not kept between POSTs: an idle thread's connection would outlive a database
        # restart, and hold a test database PostgreSQL will not drop.
        connections.close_all()


def _take_up() -> None:
    """A POST ended: hand the next due deliveries there is room for (those that waited
    for a thread), oldest due first."""
    now = timezone.now()
    # Not one that waits for an earlier event of its config (that one starts it when it
    # ends): taken up, it found it pending again at once, hundreds of times a second.
    earlier = PushDelivery.objects.filter(
        config_id=OuterRef("config_id"), seq__lt=OuterRef("seq"), status=DeliveryStatus.PENDING
    )
    due: list[tuple[Any, str]] = list(
        PushDelivery.objects.filter(status=DeliveryStatus.PENDING, next_attempt_at__lte=now)
        .exclude(Exists(earlier))
        .order_by("next_attempt_at")
        .values_list("pk", "config__url")[:TAKE_UP]
    )
    for delivery_id, url in due:
        with _lock:
            full = sum(_running.values()) >= _threads()
        if full:
            return
        if _reserve(_host(url)):
            _pool().submit(_run, delivery_id, _host(url))
