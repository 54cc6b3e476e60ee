"""Celery tasks of the dispatcher. They take ids, re-read rows and are safe to run twice."""

from __future__ import annotations

import copy
import logging
from typing import Any

from celery import shared_task
from django.conf import settings

from a2a import old_attempts, retention, worker
from a2a.models import Task
from agent_profiles.models import AgentProfile
from platform_site.dbthreads import ConnectionPool, tidy_connections

log = logging.getLogger(__name__)


@shared_task(
    name="a2a.process",
    ignore_result=True,
    soft_time_limit=settings.A2A_LONG_CALL_MAX + 60,
    time_limit=settings.A2A_LONG_CALL_MAX + 90,
)
def process(task_id: str, lease: str | None = None) -> None:
    """Do the task's due next action (send, poll, follow, cancel) if it is due and free;
    with ``lease``, a task the sweep claimed and handed off (a long call).

    Without one (a hint that waited: a retry's), the task goes to this process's threads
    that start tasks where they run (:mod:`a2a.local_dispatch`), like an immediate hint: a
    send there to an agent that may hold it is waited for, not sent twice
    (:mod:`a2a.send_watch`)."""
    from a2a import local_dispatch  # it imports this module

    if lease:
        worker.process_claimed(task_id, lease)
    elif not local_dispatch.submit([task_id]):
        worker.process_task(task_id)


def process_on_pool_thread(task_id: str | Task, lease: str | None = None) -> None:
    """Do the task's due next action on a thread of a pool (which keeps its connection);
    with ``lease``, a task claimed elsewhere and handed over with its claim; given the
    task itself, one this process claimed for the thread
    (:func:`a2a.worker.process_just_claimed`)."""
    tidy_connections()  # the thread keeps its connection for the whole batch
    try:
        if isinstance(task_id, Task):
            worker.process_just_claimed(task_id)
        elif lease:
            worker.process_claimed(task_id, lease)
        else:
            worker.process_task(task_id)
    except Exception:  # process_task records failures on the task; this is a bug guard
        log.exception("task %s: could not process it", getattr(task_id, "pk", task_id))


# The threads of batch creations' messages, kept with their database connections from one
# batch to the next, as the sweep's are (a2a.worker.sweep_threads).
batch_threads = ConnectionPool("a2a-batch", "A2A_POLL_CONCURRENCY")


@shared_task(name="a2a.process_many", ignore_result=True, soft_time_limit=90, time_limit=120)
def process_many(task_ids: list[str]) -> None:
    """Start the tasks of one batch creation, ``A2A_POLL_CONCURRENCY`` at a time (one
    message for the whole batch; each task is claimed on its own, so a task another
    worker took meanwhile is skipped)."""
    with batch_threads.lend() as threads:
        list(threads.map(process_on_pool_thread, task_ids))


@shared_task(name="a2a.tell_owed_cancel", ignore_result=True, soft_time_limit=60, time_limit=90)
def tell_owed_cancel(
    task_id: str, remote_task_id: str, agent_id: str, key: str, entry: dict[str, Any]
) -> None:
    """Tell agent ``agent_id`` to cancel its task ``remote_task_id``, which a fresh attempt
    of ``task_id`` replaced, and add what that gave to the attempt's entry (queued by
    :func:`a2a.old_attempts.tell_owed_cancel_later`)."""
    task = Task.objects.filter(pk=task_id).first()
    agent = AgentProfile.objects.filter(pk=agent_id).first()
    if task is None or agent is None:
        return
    old = copy.copy(task)  # the attempt replaced: its agent and agent task
    old.agent, old.remote_task_id = agent, remote_task_id
    told = old_attempts.tell_owed_cancel(old)
    old_attempts.note_on_entry(task, key, entry, {"remoteCancel": told})


@shared_task(name="a2a.sweep", ignore_result=True, soft_time_limit=240, time_limit=300)
def sweep() -> dict[str, int]:
    """Beat: fail overdue tasks, then claim and process due ones concurrently."""
    return worker.sweep()


@shared_task(name="a2a.prune", ignore_result=True, soft_time_limit=240, time_limit=300)
def prune() -> int:
    """Beat, hourly: delete tasks that ended more than ``TASK_RETENTION_DAYS`` ago."""
    return retention.prune_due()
