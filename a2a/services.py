"""Platform tasks: people acting on them (reply, cancel, retry) and the follow-up seam.

Views, the admin, Celery tasks, the gateway and the A2A face change a task only through
the business rules of this app; each is imported from the module that defines it:

* here: :func:`reply_to_task`, :func:`cancel_task`, :func:`retry_task`;
  :func:`deliver_followup` sends a reply or a cancel to the agent (over A2A when
  ``task.transport == "a2a"``, else through the gateway transport the ``gateway`` app
  registers at start, ``a2a.transports.gateway()``);
* :mod:`a2a.send_failures` — :func:`~a2a.send_failures.handle_send_failure`, what a
  failed send means (retry with backoff for transient errors while attempts remain, then
  fall back to the gateway: at once for 4xx, agents without an endpoint, or agents online
  on the socket; answers that are not A2A fail the task);
* :mod:`a2a.creation` — :func:`~a2a.creation.create_task` (validation, agent choice,
  idempotency keys); :mod:`a2a.batch` — :func:`~a2a.batch.create_tasks` (many at once);
  :mod:`a2a.hints` — :func:`~a2a.hints.queue_processing`;
* :mod:`a2a.agent_updates` — :func:`~a2a.agent_updates.apply_agent_reply` (an agent's
  answer, Task or bare Message, from a poll, a stream, a blocking send or a push;
  idempotent and order-safe), :func:`~a2a.agent_updates.apply_agent_update` and
  :func:`~a2a.agent_updates.record_message`;
* :mod:`a2a.reassign` — :func:`~a2a.reassign.reassign_task` (another agent of the skill).

The HTTP side of talking to agents lives in :mod:`a2a.transports` (one transport per
binding and version), the calls the worker makes in :mod:`a2a.agent_calls`, the worker
loop (claims, sweeps) in :mod:`a2a.worker`.
"""

from __future__ import annotations

import copy
import uuid
from collections.abc import Callable
from datetime import datetime
from typing import Any

from django.db import transaction
from django.utils import timezone

from a2a import transports
from a2a.agent_push import STATUS_AT
from a2a.agent_standing import refuse_if_unable
from a2a.agent_updates import record_message
from a2a.answer_shapes import asks_in_shape, shaped_parts
from a2a.creation import _deadline
from a2a.hints import queue_processing
from a2a.models import Direction, InvalidTransition, Task
from a2a.old_attempts import (
    cancel_owed,
    note_on_entry,
    start_again_as_now,
    tell_owed_cancel,
    tell_owed_cancel_later,
)
from a2a.question_memory import answered
from a2a.reply_checks import refuse_unless_waiting, still_asking
from a2a.states import RETRYABLE_STATES, NextAction, TaskState, Transport
from a2a.wire import data_as_text, relay_message, user_message
from agent_profiles.interfaces import takes_json
from platform_site.errors import ValidationFailed

# --- people acting on tasks -----------------------------------------------------------


class QuestionChanged(InvalidTransition):
    """A reply written for a question the agent no longer asks (409): it asked another
    one meanwhile (or asked again), so the answer would land on a question nobody read."""


def reply_to_task(
    task: Task,
    *,
    text: str | None = None,
    data: dict[str, Any] | None = None,
    message: dict[str, Any] | None = None,
    by: Any = None,
    asked_at: datetime | None = None,
    question_id: str | None = None,
    metadata_update: Callable[[dict[str, Any]], dict[str, Any]] | None = None,
) -> Task:
    """Answer the agent's question: a new message on the same task and context.

    Only for a task in INPUT_REQUIRED / AUTH_REQUIRED (else 409). The task goes back to
    WORKING and the answer is delivered by :func:`deliver_followup`; polling resumes. An
    answer to a framework that resumes only on its own shape is wrapped in it
    (:mod:`a2a.answer_shapes`). ``asked_at``: when the question the person read was asked
    (the task's ``state_changed_at`` as they saw it); a task that moved since (answered
    elsewhere and asked again) is not answered: :class:`QuestionChanged`. ``question_id``:
    the same check for an API client, by the ``messageId`` of the question it read.
    ``metadata_update``: the caller's additions to the task's metadata (the face's), given
    the metadata as the locked row holds it and written with the reply's transition.
    """
    refuse_unless_waiting(task)
    if message is None and not text and data is None:
        raise ValidationFailed("A reply needs text or data.", {"fields": ["text", "data"]})
    # An agent disabled or awaiting approval since it asked gets no work: the task waits
    # on, for a person to reassign (its skill is not checked: it asked, mid-task).
    refuse_if_unable(task, "reply", skill=False)
    if message is not None:
        outbound = relay_message(
            message, task_id=task.remote_task_id, context_id=task.remote_context_id
        )
    else:
        outbound = user_message(
            skill_id=task.skill_id,
            data=data,
            text=text,
            task_id=task.remote_task_id,
            context_id=task.remote_context_id,
        )
    who = getattr(by, "username", None) or str(by or "a person")
    with transaction.atomic():
        if not still_asking(task, asked_at, question_id):
            refuse_unless_waiting(task)  # it went on or ended meanwhile: nothing to answer
            raise QuestionChanged(
                "The agent asked something else meanwhile: read its new question.",
                {"question": task.question} if question_id is not None else None,
                code="question_changed",
            )
        if metadata_update is not None:
            task.metadata = metadata_update(dict(task.metadata or {}))
        # Strands and ADK agents resume only on an answer in their own shape; their
        # question (as the locked row has it) says so, and the answer is wrapped to match.
        # Else an agent that takes text alone gets data as JSON text.
        if asks_in_shape(task.question):
            outbound["parts"] = shaped_parts(task.question, outbound.get("parts") or [])
        elif not takes_json(task.agent, task.skill_id):
            outbound = data_as_text(outbound)
        moved = task.transition(
            TaskState.WORKING,
            f"{who} replied",
            question=None,
            deadline_at=_deadline(task.agent),
            metadata=answered(task),
        )
        if not moved:
            raise InvalidTransition(f"Task {task.id} changed meanwhile; it is now {task.state}.")
        record_message(task, Direction.TO_AGENT, outbound)
        deliver_followup(task, "reply", outbound)
    return task


#: How many times a cancel tries again when the task moved on between its read and its
#: write; each failed write reloads the task, so only a task that keeps moving runs out.
CANCEL_TRIES = 5


def cancel_task(task: Task, *, by: Any = None, reason: str = "") -> Task:
    """Cancel a task that has not finished (else 409) and tell the agent.

    A task that moved on meanwhile (sent, started, asked) is still the person's to cancel:
    the cancel is tried again from the state it is in now, and refused only once it
    finished."""
    who = getattr(by, "username", None) or str(by or "a person")
    with transaction.atomic():
        for _ in range(CANCEL_TRIES):
            if task.is_terminal:
                raise InvalidTransition(
                    f"Task {task.id} is {task.state}, a final state; it cannot be canceled."
                )
            if task.cancel(reason or f"canceled by {who}"):
                break
        else:
            raise InvalidTransition(f"Task {task.id} changed meanwhile; it is now {task.state}.")
        if task.remote_task_id or task.transport != Transport.A2A:
            deliver_followup(task, "cancel", None)
    return task


def retry_task(task: Task, *, by: Any = None, tell_at_once: bool = True) -> Task:
    """A person's retry of a FAILED or REJECTED task (else 409): a fresh attempt.

    Same agent, a new message (new messageId) without the agent's old task id; output,
    artifacts, error and question are cleared and the deadline starts again. Built from
    the row as it is now (:func:`start_again_as_now`). A timed-out task's cancel of the
    agent's old task, not sent yet, is sent once the retry committed (its send takes the
    cancel's place): the outcome in the retry's ``metadata.retries`` entry. An agent that
    may not be sent it now (disabled, awaiting approval, without the skill) is refused up
    front (:class:`~a2a.exceptions.AgentInactive`): the task stays as it is, to reassign.
    ``tell_at_once`` False: that cancel goes to a worker (a list's action over many tasks,
    each told in turn, held the operator's request up to OWED_CANCEL_TIMEOUT per task).
    """
    if task.state in RETRYABLE_STATES:  # else the retry's own 409 (invalid_state)
        refuse_if_unable(task, "retry")
    who = getattr(by, "username", None) or str(by or "a person")
    taken: list[tuple[Task, dict[str, Any]]] = []  # the row as the try read it, its entry

    def attempt() -> dict[str, Any] | None:
        old = copy.copy(task)  # its agent task, owed a cancel maybe
        outbound = fresh_message(task, context_id=task.remote_context_id)
        entry = {"at": timezone.now().isoformat(), "by": who, "previousError": task.error}
        metadata = dict(task.metadata or {})
        metadata["retries"] = [*metadata.get("retries", []), entry]
        metadata["sendFailures"] = 0
        metadata.pop(STATUS_AT, None)  # the old agent task's status time: agent_push
        taken[:] = [(old, entry)]
        moved = task.resubmit(
            f"retried by {who}",
            outbound_message=outbound,
            metadata=metadata,
            deadline_at=_deadline(task.agent),
        )
        return outbound if moved else None

    start_again_as_now(task, attempt)
    old, entry = taken[0]
    if cancel_owed(old) and tell_at_once:
        note_on_entry(task, "retries", entry, {"remoteCancel": tell_owed_cancel(old)})
    elif cancel_owed(old):
        tell_owed_cancel_later(task, old, "retries", entry)
    return task


def fresh_message(task: Task, *, context_id: str = "") -> dict[str, Any]:
    """The task's first message again, as a new message (new messageId, no agent task id):
    the skill input, or a caller's own message (the A2A face) with the same content."""
    outbound = user_message(skill_id=task.skill_id, data=task.input, context_id=context_id)
    first = task.messages.filter(direction=Direction.TO_AGENT).order_by("created_at", "id")
    original = first.values_list("message", flat=True).first()
    if task.origin != "api" and isinstance(original, dict):
        outbound = relay_message(original, context_id=context_id)
        outbound["messageId"] = str(uuid.uuid4())
    return outbound


# --- seams ------------------------------------------------------------------------------


def deliver_followup(task: Task, kind: str, message: dict[str, Any] | None) -> None:
    """Send a follow-up (``kind`` "reply" with ``message``, or "cancel") to the agent.

    Over A2A the worker does it: the row gets next action SEND (the message becomes the
    outbound message) or CANCEL, and a worker is asked to act now. A task the gateway
    carries gets a gateway frame (the registered gateway transport).
    """
    if task.transport != Transport.A2A:
        transports.gateway().follow_up(task, kind, message)
        return
    if kind == "reply":
        task.schedule(NextAction.SEND, outbound_message=message, poll_interval=0.0)
    elif kind == "cancel":
        if not task.remote_task_id:
            return  # the agent never got it; nothing to cancel there
        task.schedule(NextAction.CANCEL)
    else:
        raise ValueError(f"unknown follow-up kind {kind!r}")
    queue_processing(task.pk)
