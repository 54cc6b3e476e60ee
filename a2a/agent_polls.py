"""The worker's polls of agents (``GetTask``) and the cancels it propagates to them.

Like the sends of :mod:`a2a.agent_calls`, each function takes a task the worker has
claimed, drives the agent's transport without knowing which one it is, applies the answer
with :func:`a2a.agent_updates.apply_agent_reply` and schedules what comes next through the
task's verbs; a poll answered for an attempt a person has since replaced is dropped
(:mod:`a2a.overtaken_calls`). A failed poll of a task the agent accepted keeps the task
(backoff, bounded by its deadline) unless the answer says the agent cannot have it; an
agent that does not answer ``GetTask`` at all is followed another way
(:func:`no_polling`). The batched engine (:mod:`a2a.engine`) ends its polls' failures
through the same functions.
"""

from __future__ import annotations

import logging
from typing import Any

from django.utils import timezone

from a2a import (
    agent_answers,
    agent_pauses,
    agent_reads,
    agent_registry,
    overtaken_calls,
    transports,
)
from a2a.agent_updates import apply_agent_reply
from a2a.exceptions import A2AAuthError, A2ACallError, A2AUnsupportedOperation
from a2a.follow_policy import POLL, auth_refused, can_subscribe, schedule_poll
from a2a.hints import queue_processing
from a2a.models import Task
from a2a.remote_ids import cancel_state
from a2a.states import NextAction
from agent_profiles.interfaces import CallTarget

log = logging.getLogger(__name__)


# --- poll -----------------------------------------------------------------------------


def poll(task: Task) -> None:
    """Ask the agent for its task (``GetTask``)."""
    state_before, held = task.state, task.lease_until
    target = agent_answers.target_of(task)
    news: dict[str, Any] = {}
    if agent_pauses.waits_for_poll(task):
        return
    try:
        reply = agent_reads.read_task(target, task.remote_task_id)
    except A2ACallError as exc:
        if not isinstance(exc, A2AUnsupportedOperation):
            agent_answers.outcome(task, exc)
        agent_pauses.pause_if_asked(task.agent_id, exc)
        with overtaken_calls.still_current(task) as still:
            if still and isinstance(exc, A2AUnsupportedOperation):
                no_polling(task, target, exc)
            elif still:
                poll_failed(task, target, exc)
        if not still:
            overtaken_calls.drop(task, target, None, "poll")
        return
    if task.error and auth_refused(task):
        agent_answers.outcome(task, None)  # the credential works again: health says so
    refused: A2ACallError | None = None
    # Applied only to the agent task it read: a person may have reassigned or retried
    # the task while the poll was on the wire (a2a.overtaken_calls).
    with overtaken_calls.still_current(task) as still:
        if still:
            try:
                if task.error:  # an earlier transient poll error: the agent answers again
                    task.note(error=None, if_state=task.state)
                apply_agent_reply(task, task_json=reply.task, message=None, via="a2a", pending=news)
            except A2ACallError as exc:  # not A2A, about another task: a failed poll
                refused = exc
                poll_failed(task, target, exc)
            else:
                agent_answers.after_answer(task, target, reply, state_before, POLL, news, held=held)
    if not still:
        overtaken_calls.drop(task, target, reply, "poll")
    elif refused is not None:
        agent_answers.outcome(task, refused)  # the agent's health, out of the row's lock


def poll_failed(task: Task, target: CallTarget, exc: A2ACallError) -> None:
    """Transient, or a refused credential → keep polling with backoff (the deadline bounds
    it; :func:`poll_again_after_auth_failure`); otherwise the task fails."""
    if isinstance(exc, A2AAuthError):
        poll_again_after_auth_failure(task, target, exc)
        return
    if exc.transient:
        task.note(error=exc.as_error(), if_state=task.state)
        schedule_poll(task, target, grow=True, retry_after=exc.retry_after)
        return
    task.fail(
        exc.code,
        f"Lost track of the task at agent '{task.agent_id}': {exc.message}",
        exc.as_error()["details"],
    )


def poll_again_after_auth_failure(task: Task, target: CallTarget, exc: A2AAuthError) -> None:
    """The agent refused the platform's credential (HTTP 401/403) on a poll of a task it
    accepted: the task waits in its state, ``agent_auth_failed`` in its ``error``, and is
    polled again with backoff until its deadline, where it times out naming the refusal.

    Why not fail it: the usual cause is a credential rotated at the agent before it is
    rotated at the platform. Failed at the first 401, the agent's work was lost (a retry
    would redo it) although the operator set the new credential moments later; a send
    refused so waits too (offline). A new credential (admin, registration) makes these
    polls due at once (:func:`a2a.follow_policy.credentials_changed`). The agent's
    health records the refusal as for any call, once per agent instance here: a batch of
    polls (:mod:`a2a.engine`) shares one and would write it for every task.
    """
    if task.agent.last_call_code != exc.code:
        agent_answers.outcome(task, exc)
    if not auth_refused(task):
        log.info(
            "task %s: agent %s refused the platform's credential on a poll; polled again "
            "until its deadline or a credential change",
            task.pk,
            task.agent_id,
        )
    schedule_poll(
        task, target, grow=True, retry_after=exc.retry_after, also={"error": exc.as_error()}
    )


def no_polling(task: Task, target: CallTarget, exc: A2ACallError) -> None:
    """The agent does not answer ``GetTask``: mark it, and follow the task another way."""
    agent_registry.mark_no_polling(task.agent, exc.message)
    metadata = {**(task.metadata or {}), "noPolling": exc.message[:500]}
    first_message = not (task.outbound_message or {}).get("taskId")
    if can_subscribe(task, target):
        task.schedule(NextAction.FOLLOW, 0.0, if_state=task.state, metadata=metadata)
    elif first_message:
        # Neither polls nor streams: send the message again as one blocking call (the
        # same messageId, so an agent that deduplicates sees one message).
        task.schedule(NextAction.SEND, 0.0, if_state=task.state, metadata=metadata)
    else:
        agent_answers.cannot_follow(task, metadata)
        return
    queue_processing(task.pk)


# --- cancel -------------------------------------------------------------------------------


def cancel(task: Task) -> None:
    """Propagate a cancel to the agent: one try; the outcome is noted in metadata."""
    metadata = dict(task.metadata or {})
    # Which agent task was told: a later attempt's (a retry, a reassignment) is not.
    told = {"at": timezone.now().isoformat(), "taskId": task.remote_task_id}
    try:
        target = agent_answers.target_of(task)
        reply = transports.transport_for(target).cancel(task.remote_task_id)
        metadata["remoteCancel"] = {**told, "state": cancel_state(task, reply)}
    except A2ACallError as exc:
        agent_answers.outcome(task, exc)
        metadata["remoteCancel"] = {**told, "error": exc.as_error()}
    task.cancel_propagated(metadata=metadata)
