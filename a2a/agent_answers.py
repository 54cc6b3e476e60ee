"""What follows an agent's answer, whichever call brought it (a send, a poll, a stream).

:func:`answered` notes that the agent answers; :func:`after_answer` schedules what comes
next for a task still in flight (the next poll, or the stream followed again), writing
the answer's news with that schedule, and tells the agent about a cancel that landed
while the call was on the wire; :func:`cannot_follow` says why a task can no longer be
followed. :func:`target_of` and :func:`outcome` are the agent's call target and health.
Used by :mod:`a2a.agent_calls`, :mod:`a2a.agent_streams` and the batched polls
(:mod:`a2a.engine`).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.utils import timezone

from a2a import agent_registry, sent_credentials
from a2a.exceptions import A2ACallError
from a2a.follow_policy import POLL, STREAM, base_interval, next_poll, schedule_poll
from a2a.hints import queue_processing
from a2a.models import Task
from a2a.states import (
    ACTIVE_STATES,
    TERMINAL_STATES,
    NextAction,
    TaskState,
    Transport,
)
from a2a.transports.base import AgentReply
from agent_profiles.interfaces import CallTarget


def target_of(task: Task, *, first_call: bool = False) -> CallTarget:
    """How to call the task's agent (its card read first when ``first_call`` needs it).
    The stored credential it carries is noted on the task: a send refused for it is sent
    again when that was replaced meanwhile (:mod:`a2a.sent_credentials`)."""
    target = agent_registry.target_for(task.agent, first_call=first_call)
    sent_credentials.note(task, task.agent.auth_encrypted)
    return target


def outcome(task: Task, error: A2ACallError | None) -> None:
    """Feed the call's outcome to the agent's health (a credential problem shows there)."""
    agent_registry.record_call_outcome(task.agent, error)


def answered(task: Task) -> None:
    """The agent answered: its health and last seen (:func:`agent_answered`), and the
    task's send failures cleared (:func:`clear_send_failures`)."""
    agent_answered(task)
    clear_send_failures(task)


def agent_answered(task: Task) -> None:
    """The agent answered: its health says so, and it is noted as seen (at most every
    30 s). About the agent alone: written outside the task row's lock."""
    outcome(task, None)
    seen = task.agent.last_seen_at
    if seen is None or (timezone.now() - seen).total_seconds() > 30:
        task.agent.touch()


def clear_send_failures(task: Task) -> None:
    """The task's earlier send failures no longer stand. Written from the worker's copy
    of its metadata: only under the row's lock while the task is still what the call was
    about (:mod:`a2a.overtaken_calls`), or a reassign's record made meanwhile was lost."""
    metadata = task.metadata or {}
    if metadata.get("sendFailures") or metadata.get("busyAnswers") or task.error:
        kept = {key: value for key, value in metadata.items() if key != "busyAnswers"}
        task.note(metadata={**kept, "sendFailures": 0}, error=None)


def after_answer(
    task: Task,
    target: CallTarget,
    reply: AgentReply,
    state_before: str,
    mode: str,
    news: dict[str, Any] | None = None,
    *,
    held: datetime | None = None,
    quiet: bool = False,
) -> None:
    """Keep following a task that is still active; tell the agent if we canceled meanwhile.

    ``task`` is current: transitions update it, and a lost compare-and-set reloads it.
    ``news``: fields of the answer not written yet (``pending`` of
    :func:`~a2a.agent_updates.apply_agent_update`), written with the schedule: one UPDATE
    where there were two for every answer that leaves the task in its state. ``held``: the
    lease of the poll this answers (its claim, as the poll began): its next poll never
    replaces an action queued while it was out (a person's reply to an AUTH_REQUIRED
    polled on), and only that claim is given up, not another worker's on that action.
    ``quiet``: a stream that brought nothing new (:func:`_subscribe_later`).
    """
    news = dict(news or {})
    retry_after = reply.retry_after
    polled = held is not None
    if _followed(task, mode) and task.transport == Transport.A2A:
        if mode == POLL:
            grow = task.state == state_before
            if schedule_poll(
                task, target, grow=grow, retry_after=retry_after, also=news, polled=polled
            ):
                return
        elif mode == STREAM:
            if _subscribe_later(task, target, quiet=quiet, retry_after=retry_after, news=news):
                return
        elif task.schedule(
            NextAction.FOLLOW, base_interval(task, target), if_state=task.state, **news
        ):
            return
        task.refresh_from_db()  # someone changed it meanwhile (a cancel, a push, a reply)
        news = _still_news(task, news)
        if (
            mode == POLL
            and _followed(task, mode)
            and task.transport == Transport.A2A
            and schedule_poll(
                task, target, grow=False, retry_after=retry_after, also=news, polled=polled
            )
        ):
            # The agent's push moved the task while our call was on the wire: it goes on
            # from the state the push left (never the send again).
            return
    if news:
        task.note(**news)
    if (
        task.state == TaskState.CANCELED
        and task.remote_task_id
        and not task.next_action
        and not _told_of_cancel(task)
        and reply.state not in TERMINAL_STATES  # its task ended anyway
    ):
        # Canceled while our call was on the wire: the agent has a task now; stop it.
        task.schedule(NextAction.CANCEL)
        queue_processing(task.pk)
    elif task.lease_until is not None:
        task.release(held=held)


def _told_of_cancel(task: Task) -> bool:
    """Whether the agent's current task was told of the cancel already (by the worker's
    ``CancelTask``): ``remoteCancel`` names the agent task it went to, and one left from
    an earlier attempt (a retry, a reassignment) names another."""
    told = (task.metadata or {}).get("remoteCancel")
    return isinstance(told, dict) and told.get("taskId") == task.remote_task_id


def _followed(task: Task, mode: str) -> bool:
    """Whether the task is still followed after an answer: while it is in flight, and,
    when it is polled or streamed, while it waits for authorization. A2A 1.0 (7.6): an
    agent that asked for it may go on by itself once the person signed in elsewhere, with
    no message from the client, which SHOULD keep following the task (polling it, or
    subscribing to it); until then the polls back off as for a task that works on
    unchanged, and so do the subscribes (:func:`_subscribe_later`). (A question for input
    waits for the reply.)"""
    return task.state in ACTIVE_STATES or (
        task.state == TaskState.AUTH_REQUIRED and mode in (POLL, STREAM)
    )


def _subscribe_later(
    task: Task,
    target: CallTarget,
    *,
    quiet: bool,
    retry_after: float | None,
    news: dict[str, Any],
) -> bool:
    """Subscribe again to a streamed task (working, or waiting for authorization: the
    agent may go on by itself); whether it was scheduled.

    As a poll would be: from the base interval, backing off while the subscribes bring
    nothing new (``quiet``: a stream that closed at once on the task as it was, or a
    subscribe that failed) and after the agent's ``Retry-After``. An agent that closes
    every subscribe at once, is busy or down, was subscribed to again twice a second
    until the task's deadline. Only while the stream's claim, or none, is due: a reply
    a person queued meanwhile (to a task waiting for authorization) stands."""
    delay, interval = next_poll(task, target, grow=quiet, retry_after=retry_after)
    return task.schedule(
        NextAction.FOLLOW,
        delay,
        if_state=task.state,
        if_due=(NextAction.FOLLOW, NextAction.NONE),
        poll_interval=interval,
        **news,
    )


def _still_news(task: Task, news: dict[str, Any]) -> dict[str, Any]:
    """The fields of ``news`` the task, read again, does not hold yet (a push that beat
    the send's answer wrote the agent's task id already)."""
    return {name: value for name, value in news.items() if getattr(task, name) != value}


def cannot_follow(task: Task, metadata: dict[str, Any]) -> None:
    """No way left to learn the outcome of this agent task: say so while it runs out."""
    error = {
        "code": "cannot_follow",
        "message": (
            f"Agent '{task.agent_id}' can neither be polled nor streamed, and its answer to "
            "this message was not final; the task ends at its deadline unless reassigned."
        ),
        "details": {"noPolling": metadata.get("noPolling")},
    }
    task.note(error=error, metadata=metadata, if_state=task.state)
    task.stop_following()
