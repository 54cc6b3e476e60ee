"""The worker side of dispatch: claim a due task, do its next action, schedule the next.

The row is the source of truth. A task is *due* when ``next_action`` is set and
``next_poll_at <= now``; a worker *claims* it by setting ``lease_until`` with a
conditional update (and ``select_for_update(skip_locked=True)`` on PostgreSQL in the
sweep), so two workers never act on one task at once. A killed worker's lease expires
(``A2A_LEASE_SECONDS``) and the sweep claims the task again: work is delayed, never lost.
Every path ends by releasing the lease: a transition, or a conditional re-schedule.

The calls to agents themselves are in :mod:`a2a.agent_calls` (send),
:mod:`a2a.agent_polls` (poll, cancel) and :mod:`a2a.agent_streams` (follow a stream); this
module decides which one is due and keeps the loop safe.
"""

from __future__ import annotations

import logging
from collections import Counter
from typing import Any

from django.conf import settings
from django.utils import timezone

from a2a import (
    agent_calls,
    agent_polls,
    agent_standing,
    agent_streams,
    deadlines,
    follow_policy,
    holding_agents,
    lease_keeper,
    lease_marks,
    long_calls,
    observe,
    reassign,
    rows,
    send_watch,
)
from a2a.claims import lease_seconds
from a2a.models import Task
from a2a.states import ACTIVE_STATES, NextAction, Transport
from a2a.transports.redaction import describe_failure
from agent_profiles.interfaces import call_target
from platform_site.dbthreads import ConnectionPool, drop_dead_connections, tidy_connections
from platform_site.metrics import cpu_stage

log = logging.getLogger(__name__)

# Internal errors (bugs, database trouble) while processing one task: retried this many
# times with backoff, then the task fails with a clear reason instead of looping.
MAX_INTERNAL_ERRORS = 5

__all__ = [
    "claim",
    "claim_due",
    "process_just_claimed",
    "process_task",
    "run_claimed",
    "schedule_poll",
    "sweep",
]


def claim(task_id: Any) -> Task | None:
    """Claim one task if it is due and nobody holds it; None otherwise."""
    return Task.claim(task_id)


def claim_due(limit: int, *, leave_new_for: float = 0.0, polls: bool = True) -> list[Any]:
    """Claim up to ``limit`` due tasks, oldest due first; returns their ids (new tasks
    that became due less than ``leave_new_for`` seconds ago are left to their hints;
    ``polls`` False: due polls are left to the batched engine)."""
    return Task.claim_due(limit, leave_new_for=leave_new_for, polls=polls)


def schedule_poll(task: Task, *, grow: bool, retry_after: float | None = None) -> bool:
    """Poll again later with backoff (see :func:`a2a.follow_policy.schedule_poll`)."""
    return follow_policy.schedule_poll(
        task, call_target(task.agent), grow=grow, retry_after=retry_after
    )


# --- processing one claimed task --------------------------------------------------------


@cpu_stage("worker")
def process_task(task_id: Any) -> None:
    """Claim the task and do its due action (the body of the ``a2a.process`` Celery task)."""
    task = claim(task_id)
    if task is not None:
        run_claimed(task)


ACTIONS = {
    NextAction.SEND: agent_calls.send,
    NextAction.POLL: agent_polls.poll,
    NextAction.CANCEL: agent_polls.cancel,
    NextAction.FOLLOW: agent_streams.follow,
}


def run_claimed(task: Task) -> None:
    """Do the claimed task's next action; never raises (a failure is recorded on the task)."""
    with observe.working_on(task):  # the task's ids on every log line, its trace span
        _run_claimed(task)


def _run_claimed(task: Task) -> None:
    try:
        if lease_keeper.adopt(task):
            return  # its long call runs in this process still (a lapsed claim)
        if (
            task.state in ACTIVE_STATES
            and task.deadline_at is not None
            and task.deadline_at <= timezone.now()
            and task.transport != Transport.OFFLINE
        ):
            deadlines.time_out(task)
            return
        if task.transport != Transport.A2A:
            # The gateway carries this task now; nothing for the A2A worker to do.
            task.stop_following()
            return
        if task.next_action == NextAction.SEND:
            # Nothing is sent to an agent disabled, awaiting approval or without the skill
            # since the task was given to it: another agent of the skill gets it, else it
            # ends FAILED agent_inactive (never held for an agent that may not come back).
            # A reply (the agent holds a task of this attempt) is judged as a person's
            # reply is, by the agent's status alone: the agent asked mid-task, and a
            # reply accepted by the API was then failed for a skill it dropped.
            why = agent_standing.unable(task, skill=not task.remote_task_id)
            if why is not None:
                reassign.move_off_unable(task, why)
                return
        action = ACTIONS.get(task.next_action)
        if action is None:
            task.release()
        elif not (_long_action(task) and long_calls.take(task, run_claimed)):
            action(task)
    except Exception as exc:
        log.exception("task %s: internal error during %s", task.pk, task.next_action)
        _internal_error(task, exc)


def _internal_error(task: Task, exc: Exception) -> None:
    try:
        drop_dead_connections()  # the error may be the connection's: record it on a new one
        task.refresh_from_db()
        metadata = dict(task.metadata or {})
        count = int(metadata.get("internalErrors", 0)) + 1
        metadata["internalErrors"] = count
        if count >= MAX_INTERNAL_ERRORS and not task.is_terminal:
            task.fail(
                "internal_error",
                f"The platform failed {count} times processing this task: {_described(task, exc)}",
                metadata=metadata,
            )
            return
        if count >= MAX_INTERNAL_ERRORS:
            # A finished task's leftover action (telling the agent about a cancel): give up.
            task.note(metadata=metadata)
            task.drop_action()
            return
        task.defer(min(settings.A2A_POLL_INTERVAL_MAX, 2.0**count), metadata=metadata)
    except Exception:
        log.exception("task %s: could not record the internal error", task.pk)


def _described(task: Task, exc: Exception) -> str:
    """``exc`` for the task's error, shown in the API and the admin: never its repr (an
    encoding error's holds the header it failed on, the agent's credential), its text with
    the agent's secrets redacted (:func:`a2a.transports.redaction.describe_failure`)."""
    try:
        target = call_target(task.agent) if task.agent_id else None
    except Exception:  # its credential unreadable, its interface broken: the type alone
        target = None
    return describe_failure(exc, target)


# --- the sweep ---------------------------------------------------------------------------


def _long_action(task: Task) -> bool:
    """A call that lasts as long as the agent's task: following the task (a stream), a
    send to an agent that cannot be polled (known to the registry, or found out on this
    task), or a send it holds until the task ends (:func:`a2a.holding_agents.holds`)."""
    if task.next_action == NextAction.FOLLOW:
        return True
    if task.next_action != NextAction.SEND:
        return False
    no_polling = not task.agent.polling or bool((task.metadata or {}).get("noPolling"))
    return no_polling or holding_agents.holds(task)


def _hand_off(task: Task) -> None:
    """A long call (a stream, a blocking send) gets a Celery worker of its own, holding
    this claim, where this process does not run long calls on threads of their own
    (:mod:`a2a.long_calls`: no hint listener here): the sweep must not wait for it. A lost
    message only delays it (the lease runs out and a later sweep claims the task again)."""
    from a2a.tasks import process

    lease = task.extend_lease(lease_keeper.lease())  # till a worker keeps it for the call
    try:
        process.delay(str(task.pk), lease.isoformat())
    except Exception:
        log.warning("could not hand task %s off; a later sweep will", task.pk, exc_info=True)


def _to_watched_threads(task: Task) -> bool:
    """Hand a send to an agent that may hold it (:func:`a2a.send_watch.may_hold`) to the
    threads that start tasks (:mod:`a2a.local_dispatch`), with its claim, where one is
    free at once: there it may wait past ``A2A_HTTP_TIMEOUT`` and step aside, where on the
    sweep's threads (which the sweep waits for) it was given up and sent again, and the
    agent ran the task twice. Whether it was handed over (else it runs here, as before)."""
    if task.next_action != NextAction.SEND or not send_watch.may_hold(task):
        return False
    from a2a import local_dispatch  # it imports a2a.tasks, which imports this module

    if task.lease_until is None or not local_dispatch.has_room():
        return False
    # The sweep's claim, as read with the row; taking it over renews it (Task.take_over).
    return local_dispatch.take_claimed(task.pk, task.lease_until.isoformat())


@cpu_stage("worker")
def process_claimed(task_id: Any, lease: str) -> None:
    """Run a task the sweep claimed and handed off (``lease`` proves the claim)."""
    task = Task.take_over(task_id, lease)
    if task is not None:
        run_claimed(task)


# How long a task claimed for a thread may wait for it and still start on that claim:
# part of the lease's margin over one call (lease_seconds), so its call ends in time.
FRESH_CLAIM_SLACK = 1.0


@cpu_stage("worker")
def process_just_claimed(task: Task) -> None:
    """Start a task this process claimed for a thread a moment ago, as it was created or
    read with its claim (:meth:`Task.claim_at_birth`, :meth:`Task.claim_many`): no claim,
    no read, where it started within ``FRESH_CLAIM_SLACK`` of the claim; else, as a task
    handed over, once its claim is renewed (refused if it changed meanwhile)."""
    left = (task.lease_until - timezone.now()).total_seconds()
    if left >= lease_seconds() - FRESH_CLAIM_SLACK:
        run_claimed(task)
    else:
        process_claimed(task.pk, task.lease_until.isoformat())


# The sweep's threads, kept with their database connections from one sweep to the next.
# Opened for each sweep and closed after it, every connection started a PostgreSQL
# backend and filled its caches (about 11 ms of the server's CPU each, measured) and lost
# the statements prepared on it: with tasks to start at every sweep, several connections
# a second. Tests close them after each test.
sweep_threads = ConnectionPool("a2a-sweep", "A2A_POLL_CONCURRENCY")


@cpu_stage("sweep")
def _run_in_thread(task_id: Any) -> None:
    tidy_connections()  # a sweep thread keeps its connection from one task to the next
    try:
        # The compiled joined read a hint's claim uses: the ORM's, compiled anew for each
        # batch, was a fifth of a distributed worker's CPU while the sweep started tasks
        # whose hints had waited past A2A_HINT_GRACE (more tasks created than it sends).
        task = rows.task_for_work(task_id)
        if task is None:
            return  # deleted since its claim
        if lease_marks.held_elsewhere(task):
            return  # its long call runs in another process: the claim is left to it
        if _long_action(task) and not long_calls.taken_here():
            _hand_off(task)  # to a Celery worker: the sweep must not wait for it
        elif not _to_watched_threads(task):
            run_claimed(task)
    except Exception:
        log.exception("task %s: sweep could not process it", task_id)


@cpu_stage("sweep")
def sweep() -> dict[str, int]:
    """Fail overdue tasks, then claim due ones and process them concurrently.

    Claims are taken ``A2A_POLL_CONCURRENCY`` at a time and processed at once, each read
    and run by a thread (up to ``A2A_POLL_BATCH`` per sweep), so no claimed task waits in
    a queue while its lease runs out. The threads keep their connections from one sweep
    to the next (:data:`sweep_threads`).
    """
    from a2a import agent_listing

    expired = deadlines.expire_overdue()
    listed = agent_listing.list_due()
    polled = _poll_batches()
    width = max(1, settings.A2A_POLL_CONCURRENCY)
    processed = 0
    while processed < settings.A2A_POLL_BATCH:
        ids = claim_due(
            min(width, settings.A2A_POLL_BATCH - processed),
            leave_new_for=settings.A2A_HINT_GRACE,
            polls=False,  # the engine's, above: one by one here they escaped its rate
        )
        if not ids:
            break
        with sweep_threads.lend() as threads:
            list(threads.map(_run_in_thread, ids))
        processed += len(ids)
    return {"expired": expired, "processed": processed, "polled": polled, "listed": listed}


def _poll_batches() -> int:
    """Due polls go to the batched engine (:mod:`a2a.engine`), batch after batch, up to
    ``A2A_POLL_SWEEP_MAX`` per sweep and the sweep's budget per agent
    (``A2A_AGENT_POLL_RATE``), counted over all its batches."""
    from a2a import agent_listing, engine, engine_claims

    engine_claims.new_sweep()
    polled = 0
    spent: Counter[str] = Counter()
    while polled < settings.A2A_POLL_SWEEP_MAX:
        size = min(settings.A2A_POLL_ENGINE_BATCH, settings.A2A_POLL_SWEEP_MAX - polled)
        full = len(engine_claims.spent_agents(spent))
        done = engine.poll_due(size, spent)
        polled += done
        # A short batch means nothing more is due, unless an agent used its budget in
        # it: its long-unseen polls may have hidden other agents' (searched again without it).
        if done == 0 or (done < size and len(engine_claims.spent_agents(spent)) == full):
            break
        # A loaded sweep's polls take seconds: listings due meanwhile go between batches.
        agent_listing.list_due()
    return polled
