"""Platform tasks: people acting on them (reply, cancel, retry) and the seams to the agent.

Views, the admin, Celery tasks, the gateway and the A2A face change a task only through
the business rules of this app; each is imported from the module that defines it:

* here: :func:`reply_to_task`, :func:`cancel_task`, :func:`retry_task`;
  :func:`deliver_followup` sends a reply or a cancel to the agent (over A2A when
  ``task.transport == "a2a"``, else through the gateway transport the ``gateway`` app
  registers at start, ``a2a.transports.gateway()``); :func:`handle_send_failure` decides
  what a failed send means (retry with backoff for transient errors while attempts remain,
  then fall back to the gateway: at once for 4xx, agents without an endpoint, or agents
  online on the socket; answers that are not A2A fail the task);
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
import logging
import uuid
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from a2a import sent_credentials, transports
from a2a.agent_push import STATUS_AT
from a2a.agent_standing import refuse_if_unable
from a2a.agent_updates import record_message
from a2a.answer_shapes import asks_in_shape, shaped_parts
from a2a.creation import _deadline
from a2a.exceptions import A2ACallError, A2APermanentError
from a2a.hints import queue_processing
from a2a.models import Direction, InvalidTransition, Task, TaskEvent, TaskMessage
from a2a.old_attempts import cancel_owed, note_on_entry, start_again_as_now, tell_owed_cancel
from a2a.question_memory import answered, question_answered
from a2a.reply_checks import refuse_unless_waiting, still_asking
from a2a.states import RETRYABLE_STATES, NextAction, TaskState, Transport
from a2a.wire import data_as_text, relay_message, user_message
from agent_profiles.interfaces import takes_json
from platform_site.errors import ValidationFailed

log = logging.getLogger(__name__)

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


def retry_task(task: Task, *, by: Any = None) -> Task:
    """A person's retry of a FAILED or REJECTED task (else 409): a fresh attempt.

    Same agent, a new message (new messageId) without the agent's old task id; output,
    artifacts, error and question are cleared and the deadline starts again. Built from
    the row as it is now (:func:`start_again_as_now`). A timed-out task's cancel of the
    agent's old task, not sent yet, is sent once the retry committed (its send takes the
    cancel's place): the outcome in the retry's ``metadata.retries`` entry. An agent that
    may not be sent it now (disabled, awaiting approval, without the skill) is refused up
    front (:class:`~a2a.exceptions.AgentInactive`): the task stays as it is, to reassign.
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
    if cancel_owed(old):
        note_on_entry(task, "retries", entry, {"remoteCancel": tell_owed_cancel(old)})
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


def max_attempts(task: Task) -> int:
    """Sends allowed per message for transient errors (the skill's, else the setting)."""
    return int(task.skill.max_attempts or settings.A2A_MAX_ATTEMPTS)


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


def handle_send_failure(task: Task, error: A2ACallError) -> Task:
    """A send to the agent failed: retry over HTTP, fall back to the gateway, or fail; a
    reply the agent refused for what it says goes back to the person (:func:`ask_again`).

    Transient errors (connection, timeout, 5xx, 429) are retried after
    ``A2A_RETRY_BACKOFF * 2^(n-1)`` seconds (or the agent's ``Retry-After`` when longer)
    while fewer than ``max_attempts`` sends of this message failed and the deadline
    allows; then the task goes to the gateway (the registered gateway transport), as it
    does at once for 4xx, for agents without an endpoint and for agents online on the
    socket. A 2xx answer that is not A2A fails the task (the agent may have acted on it).
    While the task waits, ``error`` keeps the agent's last answer.
    """
    if _answer_refused(task, error):
        return ask_again(task, error)
    gateway = transports.gateway()
    if gateway.takes_over_now(task, error):
        return _to_gateway(task, error)
    metadata = dict(task.metadata or {})
    failures = int(metadata.get("sendFailures", 0)) + 1
    metadata["sendFailures"] = failures
    limit = max_attempts(task)
    err = error.as_error()
    held = task.lease_until  # this worker's claim
    if error.transient and failures < limit:
        delay = max(error.retry_after or 0.0, settings.A2A_RETRY_BACKOFF * 2 ** (failures - 1))
        due = timezone.now() + timedelta(seconds=delay)
        if task.deadline_at is None or due < task.deadline_at:
            if not task.schedule(
                NextAction.SEND, delay, if_state=task.state, error=err, metadata=metadata
            ):
                _moved_meanwhile(task, held)
            elif delay < settings.A2A_SWEEP_INTERVAL:
                queue_processing(task.pk, countdown=delay)
            return task
    if gateway.may_take_over(error):
        # HTTP retries are used up (or the deadline is near): the gateway takes over.
        return _to_gateway(task, error, metadata=metadata)
    message = f"Agent '{task.agent_id}' did not accept the task: {error.message}"
    if not task.fail(error.code, message, err["details"], metadata=metadata):
        _moved_meanwhile(task, held)
    return task


# HTTP statuses of a refusal of what a request says; a JSON-RPC error comes with none
# (HTTP 200). Not 404/410 (the endpoint is gone: the gateway may still reach the agent).
_CONTENT_REFUSALS = (None, 400, 409, 413, 415, 422)


def _answer_refused(task: Task, error: A2ACallError) -> bool:
    """Whether the agent refused a reply for what it says (a JSON-RPC error such as
    -32602, an HTTP 400): not for who sends it (401/403, ``agent_auth_failed``), nor a
    task, a method or an endpoint it does not know (other codes, 404). The agent still
    waits for an answer."""
    replying = bool((task.outbound_message or {}).get("taskId") and task.remote_task_id)
    return (
        replying
        and type(error) is A2APermanentError
        and error.code == "agent_refused"
        and error.status in _CONTENT_REFUSALS
    )


def ask_again(task: Task, error: A2ACallError) -> Task:
    """A refused answer: the task waits for a person again, with the agent's question
    (the one the reply answered: :func:`~a2a.question_memory.question_answered`; for a
    reply made before that was kept, the agent's latest message) and, in ``error``, why
    the answer was refused. Handing the reply to the gateway, as other refusals go, would
    wait for a connection the agent may never make, the question unanswered. Also the
    worker's, when a refused reply's agent task, read after the refusal, still asks
    (:mod:`a2a.agent_reads`)."""
    held = task.lease_until
    known, question = question_answered(task)
    if not known:
        latest = TaskMessage.objects.filter(task=task, direction=Direction.FROM_AGENT).last()
        question = latest.message if latest else None
    replied = TaskEvent.objects.filter(task=task, to_state=TaskState.WORKING).last()
    auth = replied is not None and replied.from_state == TaskState.AUTH_REQUIRED
    err = error.as_error()
    err["message"] = f"The agent refused the answer; answer again. {error.message}"
    if not task.require_input(question, auth=auth, error=err):
        _moved_meanwhile(task, held)
    return task


def _moved_meanwhile(task: Task, held: Any) -> None:
    """The task changed while its send failed (the agent pushed it on, or a person acted),
    so the failure is not written over that. The worker lets go of its claim (``held``,
    its lease) at once and asks for the task to be taken up again from where it is now (a
    task the agent pushed about is followed, not sent again: ``agent_calls``), instead of
    leaving it held until the claim's lease runs out (``A2A_LEASE_SECONDS``). Nothing is
    let go when the lease is no longer this worker's: a task that ended, waits for a
    person or was handed on holds none, and another worker's later claim stands."""
    if held is not None and task.release(held=held):
        queue_processing(task.pk)


def _to_gateway(task: Task, error: A2ACallError, *, metadata: dict[str, Any] | None = None) -> Task:
    """Hand the task to the gateway with the agent's last answer (:func:`_keep_last_answer`),
    only while its row is as this worker read it (:func:`_still_as_read`); a send refused
    for a credential replaced meanwhile is sent again instead (:mod:`a2a.sent_credentials`).
    A failure that comes back after the task moved on (the sweep timed it out, a person
    canceled it, the agent pushed) or was claimed by another worker changes nothing of it:
    written over, a final task's error lost its real cause, and the gateway refused to
    push it."""
    held = task.lease_until  # this worker's claim
    with transaction.atomic():
        if _still_as_read(task, held):
            # Refused for a credential replaced while the send was on the wire: the new
            # one is stored, and the save's check missed the task (still on A2A then).
            if sent_credentials.replaced(task, error):
                return sent_credentials.send_again(task, error, metadata)
            _keep_last_answer(task, error, metadata=metadata)
            sent_credentials.check_after_hand_over(task, error)
            return transports.gateway().hand_over(task, error)
    was = task.state
    task.refresh_from_db()
    log.info(
        "task %s: its send failed (%s) after it changed elsewhere (%s, now %s); left as it is",
        task.pk,
        error.code,
        was,
        task.state,
    )
    _moved_meanwhile(task, held)
    return task


def _still_as_read(task: Task, held: Any) -> bool:
    """Whether the task's row is still in the state and on the transport this worker read,
    under its claim (``held``, its lease, as :meth:`Task.take_over` checks one). The row is
    locked until the caller's transaction ends (on SQLite its ``IMMEDIATE`` transaction
    holds the write lock), so nothing ends or takes the task between this check and the
    hand-over: a conditional write of the error alone would leave that gap open."""
    rows = Task.objects.select_for_update().filter(
        pk=task.pk, state=task.state, transport=task.transport, lease_until=held
    )
    return rows.values_list("pk", flat=True).first() is not None


def _keep_last_answer(
    task: Task, error: A2ACallError, *, metadata: dict[str, Any] | None = None
) -> None:
    """While the task waits for the gateway, its error and metadata say what the agent
    last answered over A2A (never a silent wait)."""
    if not task.agent.a2a_endpoint:
        if metadata is not None:
            task.note(metadata=metadata)
        return
    metadata = dict(metadata if metadata is not None else task.metadata or {})
    err = error.as_error()
    metadata["lastAgentAnswer"] = {"at": timezone.now().isoformat(), **err}
    task.note(error=err, metadata=metadata)
