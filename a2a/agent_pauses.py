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

from a2a.exceptions import A2ACallError, A2ATransientError
from a2a.models import Task
from a2a.pause_models import AgentPause
from a2a.states import NextAction

log = logging.getLogger(__name__)

PAUSED = "agent_paused"  # the code of a send not made for a pause (pause_answer)


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


def waits_for_poll(task: Task) -> bool:
    """Whether the task's poll waits for its agent's pause: then it is due again when
    the pause ends, nothing counted against it (no backoff): the agent was not called."""
    now = timezone.now()
    until = AgentPause.until_of(task.agent_id, now)
    if until is None:
        return False
    task.schedule(NextAction.POLL, max((until - now).total_seconds(), 0.0), if_state=task.state)
    return True


def pause_answer(task: Task) -> A2ATransientError | None:
    """For a send: the pause the agent asked for (by its answer to another call), as the
    answer it would give this one — a ``429`` with the time left as its ``Retry-After``,
    code :data:`PAUSED` — or None when it is not paused. The send is not made; the
    failure's one seam (:func:`a2a.send_failures.handle_send_failure`) then does what it
    does for the agent's own ``429``: the socket at once for an agent online on the
    gateway, the gateway when the pause outlasts the deadline, else the same send at the
    pause's end, uncounted."""
    now = timezone.now()
    until = AgentPause.until_of(task.agent_id, now)
    if until is None:
        return None
    return A2ATransientError(
        f"Agent '{task.agent_id}' asked to be called again later (Retry-After, in its "
        f"answer to another call): not called before {until.isoformat()}.",
        code=PAUSED,
        status=429,
        retry_after=max((until - now).total_seconds(), 0.001),
    )
