"""Reassigning a task to another agent (``POST /api/tasks/{id}/reassign``, the admin).

One of the app's business rules (map in :mod:`a2a.services`). A task that waits (submitted
or working at an agent that does not answer, offline at the gateway, waiting for input) or
has failed can go to another active agent of its skill: the one named, or the matcher's
pick among the others. The old agent is told to drop it (best effort: a cancel over A2A, or
its gateway assignment withdrawn / a ``task.cancel`` frame, which also closes the
assignment it holds unacknowledged so that it is not sent again) once the task started
again as a fresh attempt at the new agent (over the gateway, a new ``task.assign`` of its
own), and the move is recorded in the history (a ``TaskEvent``) and in
``metadata.reassignments`` (with what telling the old agent gave, added after). The worker
moves a task the same way, by itself, when its send is due for an agent that may no longer
have it (:func:`move_off_unable`: :mod:`a2a.agent_standing`).
"""

from __future__ import annotations

import copy
import logging
from typing import Any

from django.db import transaction
from django.utils import timezone

from a2a import agent_registry, agent_standing, lookups, transports
from a2a.agent_choice import choose_agent
from a2a.agent_push import STATUS_AT
from a2a.agent_standing import SKILL_DROPPED
from a2a.creation import _deadline
from a2a.exceptions import A2ACallError, UnknownAgent
from a2a.face.ids import (
    REFERENCED,
    REFERENCES,
    agent_sides,
    referenced_rows,
    references_toward,
    task_ids,
)
from a2a.hints import queue_processing
from a2a.models import InvalidTransition, Task
from a2a.old_attempts import cancel_owed, note_on_entry, start_again_as_now
from a2a.remote_ids import cancel_state
from a2a.services import fresh_message
from a2a.states import RETRYABLE_STATES, TERMINAL_STATES, Transport
from agent_profiles.exceptions import NoAgentAvailable
from agent_profiles.matching import match_agent
from agent_profiles.models import AgentProfile

log = logging.getLogger(__name__)

# Seconds the old agent gets to hear about the cancel (an operator is waiting).
OLD_AGENT_CANCEL_TIMEOUT = 3.0


def _new_agent(task: Task, agent_id: str | None) -> tuple[AgentProfile, dict[str, Any]]:
    if agent_id:
        if agent_id == task.agent_id:
            raise UnknownAgent(
                f"Task {task.id} is already assigned to agent '{agent_id}'; name another "
                "agent, or leave agentId out to let the matcher pick one.",
                {"agentId": agent_id},
            )
        return choose_agent(task.skill, agent_id)
    # Nor the agent that sent the task (its key on the face): it has it done elsewhere.
    not_these = (task.agent_id, task.created_by_agent_id)
    others = [a for a in lookups.candidates(task.skill, fresh=True) if a.id not in not_these]
    if not others:
        raise NoAgentAvailable(
            f"No other active agent offers the skill '{task.skill_id}'.",
            {"skillId": task.skill_id, "agentId": task.agent_id},
        )
    agent, match = match_agent(task.skill, agents=others)
    return agent, {**match, "chosenBy": "reassign"}


def _tell_old_agent(task: Task) -> dict[str, Any]:
    """Best effort: the old agent should stop working on it. What happened, for metadata.

    Over the gateway: an assignment it never received is withdrawn (``"withdrawn"``); one
    it was sent gets a ``task.cancel``, and its open assignment and replies are closed
    (``gateway.services.send_followup``)."""
    note: dict[str, Any] = {}
    if task.transport != Transport.A2A:
        note["gateway"] = transports.gateway().follow_up(task, "cancel", None)
    elif task.remote_task_id:
        try:
            target = agent_registry.target_for(task.agent)
            transport = transports.transport_for(target)
            reply = transport.cancel(task.remote_task_id, timeout=OLD_AGENT_CANCEL_TIMEOUT)
            note["remoteCancel"] = {"state": cancel_state(task, reply)}
        except A2ACallError as exc:
            note["remoteCancel"] = {"error": exc.as_error()}
    return note


def _references_for(
    task: Task, message: dict[str, Any], agent_id: str
) -> tuple[dict[str, Any], dict[str, str]]:
    """The first message's ``referenceTaskIds`` for the new agent, and what was mapped.

    They went to the old agent as its own ids (:func:`a2a.face.ids.references_toward`),
    which the new one cannot resolve. The caller's ids that named its own tasks (the
    task's metadata kept them, :data:`~a2a.face.ids.REFERENCED`) are mapped again, for the
    new agent: no other caller's task was kept, so none can be named."""
    callers = (task.metadata or {}).get(REFERENCED)
    if not isinstance(callers, list) or not callers:
        return message, {}
    wanted = task_ids(callers)
    known = agent_sides(referenced_rows(Task.objects.all(), wanted), wanted)
    return references_toward({**message, "referenceTaskIds": callers}, known, agent_id)


def reassign_task(task: Task, *, agent_id: str | None = None, by: Any = None) -> Task:
    """Give a waiting, offline or failed task to another active agent of its skill.

    409 for a task that completed or was canceled; 400 for an agent that is unknown,
    inactive, without the skill or the current one, and when no other agent offers it.

    A task that moved on meanwhile (sent, started, asked) is still the person's to
    reassign: the move is built from the task's row read again under a lock
    (:func:`~a2a.old_attempts.start_again_as_now`), never from ``task`` as the caller
    read it (the agent's task id recorded since, the gateway's hand-over, another
    reassign: the agent that has it now is the one told, and a reassign to it is refused
    as up front). The old agent is told only once the move committed: a refused reassign
    tells it nothing, and its answer to the cancel (a push, a poll) cannot end the task
    before the move, only be refused as another attempt's after it. A failed task's agent
    is told only of the cancel a timeout left unsent.
    """
    if task.state in TERMINAL_STATES and task.state not in RETRYABLE_STATES:
        raise InvalidTransition(
            f"Task {task.id} is {task.state}; only waiting, offline or failed tasks can be "
            "reassigned."
        )
    agent, match = _new_agent(task, agent_id)
    who = getattr(by, "username", None) or str(by or "a person")
    return _reassign(task, agent, match, who)


def move_off_unable(task: Task, why: dict[str, Any]) -> None:
    """The worker's claimed task is due to be sent to an agent that may not be sent it
    (:func:`a2a.agent_standing.unable`: disabled, awaiting approval, without the skill
    now): nothing is sent to it. The task goes to another active agent of its skill, as a
    person's reassign without ``agentId`` does (the matcher's pick), ``why`` in its
    ``metadata.reassignments`` entry and its history; with none, it ends FAILED
    ``agent_inactive`` saying why (a person can reassign it once an agent is back), never
    held for an agent that may never come back (as creation's ``no_agent``). The old
    agent is told to drop its task (it had one: a reply was due) only while active."""
    held = task.lease_until  # this worker's claim
    what = f"agent '{task.agent_id}' {why['message']}"
    try:
        agent, match = _new_agent(task, None)
    except NoAgentAvailable:
        message = (
            f"Not sent: {what}, and no other active agent offers skill '{task.skill_id}'. "
            "Reassign the task once one does."
        )
        details = {"agentId": task.agent_id, "skillId": task.skill_id, "reason": why["reason"]}
        with transaction.atomic():
            if _still_claimed(task, held) and task.fail(agent_standing.CODE, message, details):
                return
        _let_go(task, held)
        return
    try:
        _reassign(
            task,
            agent,
            match,
            "the platform",
            why=why,
            tell=why["reason"] == SKILL_DROPPED,
            claimed=(held, task.agent_id),
        )
    except _MovedMeanwhile:
        _let_go(task, held)


class _MovedMeanwhile(Exception):
    """The claimed task changed before the platform's own move (a person reassigned,
    retried or canceled it): what the person did stands."""


def _still_claimed(task: Task, held: Any) -> bool:
    """Whether the row is still this worker's claim (``held``) for the same agent, locked
    until the caller's transaction ends: a person's move in the same state (a reassign
    is SUBMITTED again) is not overwritten, which a compare-and-set on the state misses."""
    rows = Task.objects.select_for_update().filter(
        pk=task.pk, lease_until=held, agent_id=task.agent_id
    )
    return rows.values_list("pk", flat=True).first() is not None


def _let_go(task: Task, held: Any) -> None:
    """The task moved meanwhile: let go of the claim if still this worker's, and have it
    taken up again from where it is now (rather than held till the lease runs out)."""
    if held is not None and task.release(held=held):
        queue_processing(task.pk)


def _reassign(
    task: Task,
    agent: AgentProfile,
    match: dict[str, Any],
    who: str,
    *,
    why: dict[str, Any] | None = None,
    tell: bool = True,
    claimed: tuple[Any, str] | None = None,
) -> Task:
    """Move ``task`` to ``agent`` (see :func:`reassign_task`); ``why`` the platform's
    reason for a move nobody asked for, ``tell`` whether the old agent is told,
    ``claimed`` (the worker's lease, the agent it judged) that the move is made only
    while the row is still that claim (else :class:`_MovedMeanwhile`)."""
    taken: list[tuple[Task, dict[str, Any]]] = []  # the row as the try read it, its entry
    because = f": agent '{task.agent_id}' {why['message']}" if why else ""

    def attempt() -> dict[str, Any] | None:
        # ``task`` is the row as it is now, locked (start_again_as_now read it again).
        if claimed is not None and (task.lease_until, task.agent_id) != claimed:
            raise _MovedMeanwhile
        if task.agent_id == agent.id:  # another reassign gave it to that agent meanwhile
            _new_agent(task, agent.id)  # refused as the current agent, as up front
        old = copy.copy(task)  # the old agent's task, to tell it once the move is in
        outbound, metadata, entry = _move(task, agent.id, match, who)
        if why is not None:
            entry["reason"] = {"code": agent_standing.CODE, **why}
        taken[:] = [(old, entry)]
        moved = task.reassign(
            agent,
            f"reassigned by {who} from agent '{old.agent_id}' to agent '{agent.id}'{because}",
            outbound_message=outbound,
            remote_context_id="",
            attempts=0,
            metadata=metadata,
            deadline_at=_deadline(agent),
        )
        return outbound if moved else None

    start_again_as_now(task, attempt)
    old, entry = taken[0]
    # A failed task's agent is told only of a cancel the row still owed (a timeout's, not
    # sent yet): the reassign's send took its place.
    if tell and (old.state not in TERMINAL_STATES or cancel_owed(old)):
        note_on_entry(task, "reassignments", entry, _tell_safely(old))
    log.info(
        "task %s reassigned from %s to %s by %s",
        task.pk,
        old.agent_id,
        agent.id,
        who,
        extra={"task_id": str(task.pk), "agent_id": agent.id},
    )
    return task


def _move(
    task: Task, agent_id: str, match: dict[str, Any], who: str
) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    """The reassign's first message, metadata and ``metadata.reassignments`` entry, from
    the task as it is now (built again on each try: what the previous state was, what
    its metadata holds, changes when the task moves)."""
    outbound, references = _references_for(task, fresh_message(task), agent_id)
    # What the old agent did or answered, and its status time (its clock: agent_push).
    dropped = (
        "noPolling",
        "noStreaming",
        "noSubscribe",
        "lastAgentAnswer",
        "sendFailures",
        "busyAnswers",
    )
    metadata = {k: v for k, v in (task.metadata or {}).items() if k not in (*dropped, STATUS_AT)}
    if references:
        metadata[REFERENCES] = {**metadata.get(REFERENCES, {}), **references}
    metadata["match"] = match
    entry = {
        "at": timezone.now().isoformat(),
        "by": who,
        "from": task.agent_id,
        "to": agent_id,
        "previousState": task.state,
        "previousError": task.error,
        "previousRemoteTaskId": task.remote_task_id or None,
    }
    metadata["reassignments"] = [*metadata.get("reassignments", []), entry]
    return outbound, metadata, entry


def _tell_safely(old: Task) -> dict[str, Any]:
    """:func:`_tell_old_agent`, for a move already made: an unexpected error (an
    unreadable credential, say) is noted, not raised: the person's reassign stands."""
    try:
        return _tell_old_agent(old)
    except Exception as exc:
        log.exception("task %s: could not tell agent %s to drop it", old.pk, old.agent_id)
        error = {"code": "internal_error", "message": type(exc).__name__, "details": None}
        return {"gateway" if old.transport != Transport.A2A else "remoteCancel": {"error": error}}
