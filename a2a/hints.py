"""Hints: telling a worker that a task is due now, so it does not wait for the sweep.

A hint is only a hint: the row is the source of truth, and a task whose hint is lost is
found by the sweep. New tasks created where this process starts tasks on its own threads
(the embedded platform) are claimed at birth and handed to those threads as they are
(:func:`claim_at_birth`, :func:`start_born`): a hint that cannot be lost but with the
process, whose claims then run out (delayed, never lost).
"""

from __future__ import annotations

import copy
import logging
import marshal
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

    if not sends or not local_dispatch.starts_soon(len(sends)):
        return False
    for task in sends:
        task.claim_at_birth()
    return True


def start_born(tasks: list[Task]) -> None:
    """After commit, start tasks claimed at birth on this process's threads, each thread
    with a copy of its own: the creating request goes on with the original (its answer,
    its push configs)."""
    from a2a import local_dispatch

    def start() -> None:
        try:
            copies = [_own_copy(task) for task in tasks]
        except Exception:  # never fail the request that made them: the sweep starts them
            log.exception("could not hand %d new task(s) to this process's threads", len(tasks))
            local_dispatch.give_up(tasks)
            return
        local_dispatch.start_claimed(copies)

    transaction.on_commit(start)


def _own_copy(task: Task) -> Task:
    """A copy of a new task a worker thread may change freely: its JSON fields and agent
    are its own (the agent is the registry cache's, shared by threads: read-only).

    On every new task's path, so done the cheap way (27 against 38 us, measured): the
    instances through Django's own ``__getstate__`` (what pickling them copies) rather
    than ``copy.copy``'s reduce protocol, the JSON values through ``marshal``, which
    copies dicts, lists and scalars in C (``copy.deepcopy`` for anything else)."""
    mine = _clone(task)
    fields = (task.input, task.metadata, task.outbound_message)
    try:
        fields = marshal.loads(marshal.dumps(fields))
    except ValueError:  # not plain JSON values
        fields = copy.deepcopy(fields)
    mine.input, mine.metadata, mine.outbound_message = fields
    mine._state.fields_cache["agent"] = _clone(task.agent)
    return mine


def _clone(instance: Any) -> Any:
    """A shallow copy of a model instance, its state and cached relations its own."""
    mine = type(instance).__new__(type(instance))
    mine.__dict__.update(instance.__getstate__())
    return mine
