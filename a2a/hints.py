"""Hints: telling a worker that a task is due now, so it does not wait for the sweep.

A hint is only a hint: the row is the source of truth, and a task whose hint is lost is
found by the sweep. New tasks created where this process starts tasks on its own threads
(the embedded platform) are claimed at birth and handed to those threads as they are
(:func:`claim_at_birth`, :func:`start_born`): a hint that cannot be lost but with the
process, whose claims then run out (delayed, never lost).
"""

from __future__ import annotations

import logging
from typing import Any

from django.db import transaction

from a2a.models import Task

log = logging.getLogger(__name__)


def queue_processing(task_id: Any, countdown: float | None = None) -> None:
    """After commit, ask a worker to do the task's next action now (or in ``countdown`` s).

    Only a hint: if the broker loses it, the sweep finds the due task anyway. An
    immediate hint goes to this process's threads where they run (:mod:`a2a.local_dispatch`:
    the embedded platform, a distributed worker), else to the workers' Redis list
    (:mod:`a2a.hint_queue`), else as a Celery message.
    """

    def send() -> None:
        from a2a import hint_queue, local_dispatch  # they import the worker, which imports us
        from a2a.tasks import process

        if not countdown and (local_dispatch.submit([task_id]) or hint_queue.publish([task_id])):
            return

        try:
            if countdown and countdown > 0:
                process.apply_async((str(task_id),), countdown=countdown)
            else:
                process.delay(str(task_id))
        except Exception:  # the row is the source of truth; the sweep will pick it up
            log.warning(
                "could not queue a2a.process for %s; the sweep will", task_id, exc_info=True
            )

    transaction.on_commit(send)


def queue_processing_many(task_ids: list[Any]) -> None:
    """After commit, ask a worker to start these tasks: one message for all of them."""
    if len(task_ids) == 1:
        queue_processing(task_ids[0])
        return
    if not task_ids:
        return

    def send() -> None:
        from a2a import hint_queue, local_dispatch
        from a2a.tasks import process_many

        if local_dispatch.submit(task_ids) or hint_queue.publish(task_ids):
            return
        try:
            process_many.delay([str(pk) for pk in task_ids])
        except Exception:  # the rows are the source of truth; the sweep will pick them up
            log.warning("could not queue a2a.process_many; the sweep will", exc_info=True)

    transaction.on_commit(send)


def claim_at_birth(sends: list[Task]) -> bool:
    """Where this process starts tasks on its own threads (the embedded platform), claim
    these new tasks before their rows go in (:meth:`Task.claim_at_birth`): those threads
    start them as they are (:func:`start_born`), without claiming and reading each
    again. Whether they were."""
    from a2a import local_dispatch  # it imports the worker, which imports us

    if not sends or not local_dispatch.running():
        return False
    for task in sends:
        task.claim_at_birth()
    return True


def start_born(tasks: list[Task]) -> None:
    """After commit, start tasks claimed at birth on this process's threads."""
    from a2a import local_dispatch

    transaction.on_commit(lambda: local_dispatch.start_born(tasks))
