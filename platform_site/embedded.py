"""The embedded mode's in-process Celery worker and beat.

Both run as threads beside daphne in one process, on the memory broker. The database is
the source of truth, so what the memory broker loses on a restart is only a delay: beat's
sweeps find overdue tasks again.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, field

from celery.beat import EmbeddedService
from celery.worker import WorkController

from platform_site.celery import app

log = logging.getLogger(__name__)


@dataclass
class EmbeddedWorkers:
    """A Celery worker (thread pool) and beat, started and stopped together."""

    concurrency: int = 4
    worker: WorkController | None = None
    beat: threading.Thread | None = None
    _thread: threading.Thread | None = field(default=None, repr=False)

    def start(self) -> None:
        """Start worker and beat threads; returns at once."""
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
        log.info("embedded Celery worker (%d threads) and beat started", self.concurrency)

    def stop(self) -> None:
        """Stop beat, then the worker (finishing what it runs), and wait for both."""
        if self.beat is not None:
            self.beat.stop()
        if self.worker is not None:
            self.worker.stop(in_sighandler=False)
        if self._thread is not None:
            self._thread.join(timeout=15)
        log.info("embedded Celery worker and beat stopped")
