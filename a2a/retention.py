"""Retention: delete tasks that ended long ago, with everything that hangs off them.

The platform keeps every task by default. An operator who sets ``TASK_RETENTION_DAYS``
keeps a task that many days after it reached a final state (COMPLETED, FAILED, CANCELED,
REJECTED); then beat deletes it with its events, messages, push configs and their
deliveries, and its gateway deliveries (the foreign keys cascade). A task that is not
final is never deleted, however old: one waiting for a person for a year is still
waiting. Without a retention the task table, and with it every count over it (the
``a2a_tasks`` gauge, the console's dashboard), grows for as long as the platform runs.

Deletion goes in small batches, each its own transaction, so a first run over a large
backlog never holds the database for long: on SQLite each batch holds the write lock
the whole process's writers queue on, and the pause between batches lets them in.
"""

from __future__ import annotations

import logging
import time
from datetime import UTC, datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import QuerySet
from django.utils import timezone

from a2a.models import Task
from a2a.states import TERMINAL_STATES, NextAction
from platform_site import metrics

log = logging.getLogger("a2a.lifecycle")

BATCH = 200  # tasks per transaction: on SQLite under 30 ms of the write lock each
PAUSE = 0.01  # seconds between batches, for the writers waiting on the database
RUN_SECONDS = 60.0  # most one beat run spends; the next run goes on
EARLIEST = datetime.min.replace(tzinfo=UTC)  # the cutoff of a retention beyond the calendar


def cutoff(days: float, now: datetime | None = None) -> datetime:
    """Tasks that ended before this are past a retention of ``days``.

    A retention reaching back past the calendar's first day (``TASK_RETENTION_DAYS=800000``,
    "practically forever") is that first moment: no task ended before it, so none goes.
    """
    try:
        return (now or timezone.now()) - timedelta(days=days)
    except OverflowError:
        if days > 0:
            return EARLIEST
        raise  # a negative retention is refused by every caller before this


def expired(before: datetime) -> QuerySet[Task]:
    """Tasks in a final state since before ``before``. A task ends after it is created,
    so ``created_at`` bounds the search to old rows (its index), whatever the table holds.

    A canceled task whose agent is still owed the cancel (a worker tells it once, soon)
    stays until it is told: deleting the row dropped the cancel, and the agent worked on
    at a task nobody wanted (``prunetasks --days 0.001`` right after a cancel)."""
    return Task.objects.filter(
        created_at__lt=before, state__in=TERMINAL_STATES, state_changed_at__lt=before
    ).exclude(next_action=NextAction.CANCEL)


def prune(
    before: datetime,
    *,
    batch: int = BATCH,
    max_seconds: float | None = None,
    pause: float = PAUSE,
) -> int:
    """Delete the tasks :func:`expired` before ``before``, ``batch`` per transaction, until
    none is left or ``max_seconds`` have passed; returns how many were deleted.

    Each batch selects its tasks and deletes them in one transaction. On PostgreSQL the
    selected rows stay locked until the delete (rows another transaction holds are left
    for the next run), so a task retried meanwhile is either deleted before the retry or
    not selected; on SQLite the transaction holds the database's write lock throughout.
    """
    started = time.monotonic()
    total = 0
    while True:
        with transaction.atomic():
            ids = list(
                expired(before)
                .select_for_update(skip_locked=True)
                .order_by("created_at")
                .values_list("pk", flat=True)[:batch]
            )
            if ids:
                # Only the ids: the collector would otherwise read every column of each
                # task, artifacts included (up to TASK_ARTIFACTS_MAX_BYTES each).
                Task.objects.filter(pk__in=ids).only("pk").delete()
        total += len(ids)
        if len(ids) < batch:
            break
        if max_seconds is not None and time.monotonic() - started >= max_seconds:
            break
        time.sleep(pause)
    if total:
        metrics.TASKS_PRUNED.inc(total)
        log.info("deleted %d tasks that ended before %s", total, before.isoformat())
    return total


def prune_due() -> int:
    """Beat: apply ``TASK_RETENTION_DAYS`` (0: keep everything, do nothing)."""
    days = float(settings.TASK_RETENTION_DAYS)
    if days <= 0:
        return 0
    return prune(cutoff(days), max_seconds=RUN_SECONDS)
