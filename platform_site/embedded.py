"""The embedded mode's in-process Celery worker and beat.

Both run as threads beside daphne in one process, on the memory broker. The database is
the source of truth, so what the memory broker loses on a restart is only a delay: beat's
sweeps find overdue tasks again. Higher apps add services that start and stop with them
(:func:`register_service`: a2a starts new tasks on its own threads, not by message).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from platform_site.celery import app

if TYPE_CHECKING:
    from celery.worker import WorkController

log = logging.getLogger(__name__)

# What higher apps run beside the embedded worker: (start, stop) pairs they register at
# app start, since this module cannot import them (a2a's local dispatch of new tasks).
_services: list[tuple[Callable[[], None], Callable[[], None]]] = []


def register_service(start: Callable[[], None], stop: Callable[[], None]) -> None:
    """Have ``start`` run once the embedded worker runs, and ``stop`` before it stops."""
    if (start, stop) not in _services:
        _services.append((start, stop))


@dataclass
class EmbeddedWorkers:
    """A Celery worker (thread pool) and beat, started and stopped together."""

    concurrency: int = 4
    worker: WorkController | None = None
    beat: threading.Thread | None = None
    _thread: threading.Thread | None = field(default=None, repr=False)

    def start(self) -> None:
        """Start worker and beat threads, then the registered services; returns at once."""
        from celery.beat import EmbeddedService
        from celery.worker import WorkController

        self.worker = WorkController(
            app=app,
            hostname="embedded@localhost",
            pool_cls="threads",
            concurrency=self.concurrency,
            without_heartbeat=True,
            without_mingle=True,
            without_gossip=True,
            loglevel=logging.WARNING,
        )
        self._thread = threading.Thread(target=self.worker.start, name="celery-worker", daemon=True)
        self._thread.start()
        # The plain scheduler keeps the schedule in memory: no celerybeat-schedule file.
        self.beat = EmbeddedService(app, thread=True, scheduler_cls="celery.beat:Scheduler")
        self.beat.start()
        for start, _ in _services:
            start()
        log.info("embedded Celery worker (%d threads) and beat started", self.concurrency)

    def stop(self) -> None:
        """Stop the services, beat, then the worker (finishing what it runs), and wait."""
        for _, stop in reversed(_services):
            stop()
        if self.beat is not None:
            self.beat.stop()
        if self.worker is not None:
            self.worker.stop(in_sighandler=False)
        if self._thread is not None:
            self._thread.join(timeout=15)
        log.info("embedded Celery worker and beat stopped")
