"""An agent's ``Retry-After``, obeyed for all its tasks.

An agent that answers a poll or a send ``429`` or ``503`` with ``Retry-After`` is paused
until then (:class:`~a2a.pause_models.AgentPause`, :meth:`Task.pause_polls
<a2a.scheduling.TaskScheduling.pause_polls>`): the engine's claim leaves it out, and a
poll or a send of one of its tasks taken up meanwhile (a hint's, a sweep's, a retry's)
waits for the pause's end instead of calling, and the agent is not listed
(:mod:`a2a.agent_listing`). One row read per call made on its own; the engine's batches
and the listings read the pauses once per claim.
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta

from django.db import DatabaseError
from django.utils import timezone

from a2a.exceptions import A2ACallError
from a2a.models import Task
from a2a.pause_models import AgentPause
from a2a.states import NextAction

log = logging.getLogger(__name__)


def pause_if_asked(agent_id: str, exc: A2ACallError) -> datetime | None:
    """The agent answered a call with ``Retry-After`` (a ``429``, a ``503``): every poll,
    send and listing of its tasks waits that long, in every worker, whichever way the
    call was made (a batch's poll, a single one, a send, a listing). About the agent, not
    a task: written outside a task row's lock. When the pause ends, if one was asked."""
    if not exc.retry_after:
        return None
    until = timezone.now() + timedelta(seconds=exc.retry_after)
    try:
        Task.pause_polls(agent_id, until)
    except DatabaseError as error:
        # The pause spares the agent; it is not the call's work: the answer is still
        # applied, and the task is not charged with an internal error.
        log.warning(
            "agent %s: could not pause its calls (%s)",
            agent_id,
            error,
            extra={"agent_id": agent_id},
        )
    return until


def waits_for_pause(task: Task, action: str) -> bool:
    """Whether the task's call (``action``: a poll, a send) waits for its agent's pause:
    then it is due again when the pause ends, and nothing is counted against it (no
    attempt, no backoff): the agent was not called."""
    now = timezone.now()
    until = AgentPause.until_of(task.agent_id, now)
    if until is None:
        return False
    delay = max((until - now).total_seconds(), 0.0)
    if action == NextAction.SEND:
        task.defer(delay)  # the same send, its claim let go
    else:
        task.schedule(action, delay, if_state=task.state)
    return True
