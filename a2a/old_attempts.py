"""What a fresh attempt (a person's retry or reassign) owes the attempt it replaces.

Part of :mod:`a2a.services` and :mod:`a2a.reassign`. A fresh attempt is built from
the task's row read again under a lock (:func:`start_again_as_now`, :func:`read_locked`),
not from the copy the person's page or the API read: what the worker or the gateway wrote
meanwhile in the same state (the agent's task id, a hand-over) is what the old agent must
be told about. It writes its own send over the row's next action, so a cancel of the
agent's task the row still owed (:func:`cancel_owed`, the deadline sweep's on a timeout)
is sent by the attempt once it committed (:func:`tell_owed_cancel`), and what that gave
is added to the attempt's entry in the metadata (:func:`note_on_entry`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from django.db import transaction
from django.utils import timezone

from a2a import agent_registry, transports
from a2a.agent_updates import record_message
from a2a.exceptions import A2ACallError
from a2a.hints import queue_processing
from a2a.models import Direction, InvalidTransition, Task
from a2a.remote_ids import cancel_state
from a2a.states import NextAction, Transport
from platform_site.errors import NotFound

log = logging.getLogger(__name__)

# Seconds the agent gets to hear about the cancel (a person is waiting).
OWED_CANCEL_TIMEOUT = 3.0
# How many times a move is built again when the task moved on before its write; each try
# reads the row again, so only a task that keeps moving runs out.
MOVE_TRIES = 5


def start_again_as_now(task: Task, attempt: Callable[[], dict[str, Any] | None]) -> None:
    """Run ``attempt`` (builds a fresh attempt from ``task`` as it is now and writes it
    with its verb: reassign, retry; the new first message, or None when the task moved on
    before the write), record that message and queue the send, in one transaction.

    Each try first reads the row again into ``task``, locked until the transaction ends
    (:func:`read_locked`): the caller's copy may be older than a change
    in the same state (the send's answer recorded the agent's task, the gateway took the
    task over, another person moved it), which the verb's compare-and-set on the state
    alone does not see. A task that moved on to another state can still start again; the
    verb refuses (409) one that can no longer (it finished)."""
    with transaction.atomic():
        for _ in range(MOVE_TRIES):
            read_locked(task)
            outbound = attempt()
            if outbound is not None:
                break
        else:
            raise InvalidTransition(f"Task {task.id} changed meanwhile; it is now {task.state}.")
        record_message(task, Direction.TO_AGENT, outbound)
        queue_processing(task.pk)


def read_locked(task: Task) -> None:
    """Read the task's row again into ``task`` (with its agent and skill), locked until
    the caller's transaction ends (on SQLite its ``IMMEDIATE`` transaction holds the write
    lock). Nothing changes the row between this read and the verb's write, so the verb's
    compare-and-set on the state is enough: alone, it let through a row that changed in
    the same state (the agent's task id recorded, the gateway taking it over)."""
    # Locked first, read after: a locking read that joins the agent found no row on
    # PostgreSQL when the task it waited for was moved to another agent (the row read
    # again after the wait no longer joins the agent read before it).
    locked = Task.objects.select_for_update().filter(pk=task.pk).values_list("pk", flat=True)
    if locked.first() is None:
        raise NotFound(f"Task {task.id} no longer exists.")
    task.refresh_from_db(from_queryset=Task.objects.select_related("agent", "skill"))


def cancel_owed(row: Task) -> bool:
    """Whether the row holds a cancel of the agent's task over A2A not sent yet (the
    sweep's, when it timed the task out: ``next_action`` CANCEL). A fresh attempt's send
    replaces that action, so nobody else would tell the agent."""
    return bool(
        row.remote_task_id
        and row.transport == Transport.A2A
        and row.next_action == NextAction.CANCEL
    )


def tell_owed_cancel(old: Task) -> dict[str, Any]:
    """Best effort, once the fresh attempt committed: cancel the agent task ``old`` (the
    row as it was read before the attempt) still owed. Recorded as the worker's cancel
    records it (:func:`a2a.agent_polls.cancel`): when, which agent task, and its state or
    the call's error (an unexpected error too: the person's action stands)."""
    told: dict[str, Any] = {"at": timezone.now().isoformat(), "taskId": old.remote_task_id}
    try:
        target = agent_registry.target_for(old.agent)
        reply = transports.transport_for(target).cancel(
            old.remote_task_id, timeout=OWED_CANCEL_TIMEOUT
        )
        return {**told, "state": cancel_state(old, reply)}
    except A2ACallError as exc:
        return {**told, "error": exc.as_error()}
    except Exception as exc:
        log.exception("task %s: could not tell agent %s to cancel", old.pk, old.agent_id)
        error = {"code": "internal_error", "message": type(exc).__name__, "details": None}
        return {**told, "error": error}


def tell_owed_cancel_later(task: Task, old: Task, key: str, entry: dict[str, Any]) -> None:
    """:func:`tell_owed_cancel` on a worker (``a2a.tell_owed_cancel``), what it gave added
    to the attempt's entry ``entry`` in ``metadata[key]`` there. Best effort as the call
    itself: a message lost with its worker leaves the agent's old task uncanceled."""
    from a2a.tasks import tell_owed_cancel as queued  # the Celery tasks import this module

    args = (str(task.pk), old.remote_task_id, old.agent_id, key, entry)

    def send() -> None:
        try:
            queued.delay(*args)
        except Exception:  # a broker outage: the person's retry stands, untold as a lost one
            log.warning(
                "task %s: could not queue the cancel of agent %s's task %s",
                task.pk,
                old.agent_id,
                old.remote_task_id,
                exc_info=True,
            )

    transaction.on_commit(send)


def note_on_entry(task: Task, key: str, entry: dict[str, Any], told: dict[str, Any]) -> None:
    """Add ``told`` (what telling the old agent gave) to the attempt's entry ``entry`` in
    ``metadata[key]`` (``reassignments``, ``retries``), only while it is still the last
    one: a later attempt's entry is not written over. The row stays locked until the
    transaction ends, so nothing changes the metadata meanwhile."""
    if not told:
        return
    with transaction.atomic():
        row = Task.objects.select_for_update().filter(pk=task.pk).first()
        steps = (row.metadata or {}).get(key) if row is not None else None
        last = steps[-1] if isinstance(steps, list) and steps else None
        if row is None or last != entry:  # the entry as written (JSON: the same values)
            return
        metadata = {**row.metadata, key: [*steps[:-1], {**last, **told}]}
        if row.note(metadata=metadata):
            task.metadata = metadata  # the caller's answer shows it too
