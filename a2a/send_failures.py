"""What a failed send to an agent means (the one seam: :func:`handle_send_failure`).

Transient errors are sent again with backoff while the message's attempts remain
(:func:`max_attempts`), then the task falls back to the gateway: at once for 4xx, for
agents without an endpoint, or agents online on the socket; answers that are not A2A fail
the task. A reply the agent refused for what it says goes back to the person
(:func:`ask_again`).
"""

from __future__ import annotations

import logging
import random
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from a2a import sent_credentials, transports
from a2a.agent_pauses import PAUSED
from a2a.exceptions import A2ACallError, A2APermanentError
from a2a.hints import queue_processing
from a2a.models import Direction, Task, TaskEvent, TaskMessage
from a2a.question_memory import question_answered
from a2a.states import NextAction, TaskState

log = logging.getLogger(__name__)


def max_attempts(task: Task) -> int:
    """Sends allowed per message for transient errors (the skill's, else the setting)."""
    return int(task.skill.max_attempts or settings.A2A_MAX_ATTEMPTS)


def handle_send_failure(task: Task, error: A2ACallError) -> Task:
    """A send to the agent failed: retry over HTTP, fall back to the gateway, or fail; a
    reply the agent refused for what it says goes back to the person (:func:`ask_again`).

    Transient errors (connection, timeout, 5xx, 429) are retried after
    ``A2A_RETRY_BACKOFF * 2^(n-1)`` seconds (or the agent's ``Retry-After`` when longer)
    while fewer than ``max_attempts`` sends of this message failed and the deadline
    allows (a ``429``/``503`` with ``Retry-After`` is not counted: the agent asked to be
    called later, and is, until the deadline); then the task goes to the gateway (the
    registered gateway transport), as it does at once for 4xx, for agents without an
    endpoint and for agents online on the socket. A 2xx answer that is not A2A fails the
    task (the agent may have acted on it).
    While the task waits, ``error`` keeps the agent's last answer.
    """
    if _answer_refused(task, error):
        return ask_again(task, error)
    gateway = transports.gateway()
    if gateway.takes_over_now(task, error):
        return _to_gateway(task, error)
    metadata = dict(task.metadata or {})
    failures = int(metadata.get("sendFailures", 0))
    if _asks_to_wait(error):
        # An agent that asks to be called again later (429/503 with Retry-After) is
        # waited for, within the deadline: giving up after a few such answers sent the
        # tasks of a busy agent to the gateway, where an agent without a socket never
        # takes them.
        delay = _busy_delay(task, error, metadata)
    else:
        failures += 1
        delay = max(error.retry_after or 0.0, settings.A2A_RETRY_BACKOFF * 2 ** (failures - 1))
    metadata["sendFailures"] = failures
    limit = max_attempts(task)
    err = error.as_error()
    held = task.lease_until  # this worker's claim
    if error.transient and failures < limit:
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


def _asks_to_wait(error: A2ACallError) -> bool:
    """A ``429`` or ``503`` with ``Retry-After``: the agent is busy, not failing (also a
    send not made for the agent's pause: :func:`a2a.agent_pauses.pause_answer`)."""
    return error.transient and bool(error.retry_after) and error.status in (429, 503)


# The longest wait between two sends of a task its agent keeps answering "busy": a proxy
# answering 503 with Retry-After: 1 for an agent that is gone costs ten sends over a
# five-minute deadline, not three hundred.
BUSY_BACKOFF_MAX = 60.0


def _busy_delay(task: Task, error: A2ACallError, metadata: dict[str, Any]) -> float:
    """When to send again after a busy answer: the agent's ``Retry-After``, but at least
    a backoff that doubles with each busy answer to this task (``busyAnswers``), from
    ``A2A_RETRY_BACKOFF`` (never under a second) up to :data:`BUSY_BACKOFF_MAX` — unless
    that would pass the deadline where the agent's own time would not: one more try then,
    rather than the gateway. A send not made for a pause another call met goes at the
    pause's end, plus up to a tenth of it (at most a second), so that the sends the pause
    held do not all come back at one instant."""
    asked = float(error.retry_after or 0.0)
    if error.code == PAUSED:
        return asked + random.uniform(0.0, min(0.1 * asked, 1.0))
    busy = int(metadata.get("busyAnswers", 0)) + 1
    metadata["busyAnswers"] = busy
    backoff = min(max(settings.A2A_RETRY_BACKOFF, 1.0) * 2 ** (busy - 1), BUSY_BACKOFF_MAX)
    delay = max(asked, backoff)
    if task.deadline_at is not None:
        left = (task.deadline_at - timezone.now()).total_seconds()
        if delay >= left > max(asked, 1.0):
            delay = max(asked, 1.0)
    return delay


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
