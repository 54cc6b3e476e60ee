"""Webhook POSTs on threads of their own: a bounded number per process, and per host.

A push notification is a POST to a client's webhook, which may take up to
``A2A_PUSH_TIMEOUT`` to fail (longer when it trickles bytes). Made on the Celery worker's
threads, the ones that also poll agents and start tasks, twelve sends of one client with
webhooks that never answer stalled every other task's polls for minutes (embedded: four
threads). So a delivery is handed here (:func:`hand`): at most ``A2A_PUSH_THREADS`` POSTs
at once in the process, and ``A2A_PUSH_PER_HOST`` to one webhook host, so that a hung
host holds that many threads and never the others' pushes. A delivery that finds no room
waits in its row, put back a moment behind the others (:func:`_put_back`), and each POST
that ends takes up the next ones there is room for (:func:`_take_up`), oldest due first;
the beat sweep re-queues any left overdue, so a crash or a lost message only delays a
push. The threads are not daemons: a process that stops waits for the POSTs under way
(at most twice ``A2A_PUSH_TIMEOUT`` and 5 s each).
"""

from __future__ import annotations

import logging
import random
import threading
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from typing import Any
from urllib.parse import urlsplit

from django.conf import settings
from django.db import connections
from django.db.models import Exists, OuterRef
from django.utils import timezone

from a2a.push_models import DeliveryStatus, PushDelivery
from platform_site.dbthreads import tidy_connections

log = logging.getLogger(__name__)

TAKE_UP = 100  # due deliveries looked at when a POST ends (those of full hosts put back)
PUT_BACK = 1.0  # seconds (up to twice, at random) a delivery that found no room is put back

_lock = threading.Lock()
_running: Counter[str] = Counter()  # POSTs under way in this process, per webhook host
_executor: ThreadPoolExecutor | None = None
_stopping = False  # stop() waits for the POSTs under way: none is started meanwhile


def hand(delivery_id: int, url: str | None = None) -> bool:
    """Start the delivery's attempt on a push thread; False when there is no room (for
    its host, or at all): it is put back a moment (:func:`_put_back`), and a POST that
    ends, or the sweep, takes it up again."""
    if url is None:
        rows = PushDelivery.objects.filter(pk=delivery_id)
        url = rows.values_list("config__url", flat=True).first()
    if url is None:
        return False
    host = _host(url)
    if not _reserve(host):
        _put_back(delivery_id)
        return False
    _submit(delivery_id, host)
    return True


def _put_back(delivery_id: int) -> None:
    """Due again :data:`PUT_BACK` seconds from now (while it is due, not claimed): behind
    the others, so that a host whose webhooks hang, its deliveries the oldest due, does
    not keep another host's from the threads it leaves free."""
    now = timezone.now()
    PushDelivery.objects.filter(
        pk=delivery_id, status=DeliveryStatus.PENDING, next_attempt_at__lte=now
    ).update(next_attempt_at=now + timedelta(seconds=PUT_BACK * (1 + random.random())))


def _submit(delivery_id: int, host: str) -> None:
    """Run the attempt on a push thread (its room reserved), due now: one put back a
    moment ago is taken as soon as a thread is free, not when that moment has passed."""
    now = timezone.now()
    PushDelivery.objects.filter(
        pk=delivery_id,
        status=DeliveryStatus.PENDING,
        next_attempt_at__gt=now,
        next_attempt_at__lte=now + timedelta(seconds=2 * PUT_BACK),
    ).update(next_attempt_at=now)
    with _lock:
        stopping = _stopping
    if stopping:  # the delivery stays due: the sweep, or another process, takes it
        _release(host)
        return
    _pool().submit(_run, delivery_id, host)


def stop() -> None:
    """Let the POSTs under way end, and start no more until it returns: their threads
    take up nothing meanwhile, the deliveries stay due. (Tests call it between tests; a
    stopping process does not wait for it: see the module docstring.)"""
    global _executor, _stopping
    with _lock:
        executor, _executor, _stopping = _executor, None, True
    try:
        if executor is not None:
            executor.shutdown(wait=True)
    finally:
        with _lock:
            _stopping = False


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
    """The push threads, as many as ``A2A_PUSH_THREADS`` says now: one sized by an older
    value would queue a reserved POST behind the others instead of running it (the
    setting changes between tests; the old pool's threads finish their POSTs and end)."""
    global _executor
    with _lock:
        if _executor is None or _executor._max_workers != _threads():
            if _executor is not None:
                _executor.shutdown(wait=False)
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
    # Those put back a moment ago too (they waited for a thread), and not one that waits
    # for an earlier event of its config (that one starts it when it ends): taken up, it
    # found it pending again at once, hundreds of times a second.
    soon = timezone.now() + timedelta(seconds=2 * PUT_BACK)
    earlier = PushDelivery.objects.filter(
        config_id=OuterRef("config_id"), seq__lt=OuterRef("seq"), status=DeliveryStatus.PENDING
    )
    due: list[tuple[Any, str]] = list(
        PushDelivery.objects.filter(status=DeliveryStatus.PENDING, next_attempt_at__lte=soon)
        .exclude(Exists(earlier))
        .order_by("next_attempt_at")
        .values_list("pk", "config__url")[:TAKE_UP]
    )
    for delivery_id, url in due:
        with _lock:
            full = sum(_running.values()) >= _threads()
        if full:
            return
        host = _host(url)
        if _reserve(host):
            _submit(delivery_id, host)
        else:
            _put_back(delivery_id)  # its host is full: behind the others
