"""The worker's calls to agents: send, poll, follow a stream, cancel.

Each function takes a task the worker has claimed, drives the agent's transport (chosen
from its :class:`~agent_profiles.interfaces.CallTarget`: binding, version, credentials)
without knowing which one it is, applies the answer with
:func:`a2a.agent_updates.apply_agent_reply` and schedules what comes next through the
task's verbs. Every path ends by releasing the claim.

How a task is followed, and when it is polled again, is :mod:`a2a.follow_policy`.

An agent found not to answer ``GetTask`` (HTTP 404/405/501, JSON-RPC -32601 or
UnsupportedOperation) is marked "no polling" in the registry and on the task, and the
task is followed the other way at once — never failed for "lost track" while the agent
works.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.utils import timezone

from a2a import (
    agent_listing,
    agent_push_tokens,
    agent_registry,
    send_gate,
    transports,
)
from a2a.agent_updates import apply_agent_reply
from a2a.creation import queue_processing
from a2a.exceptions import (
    A2ACallError,
    A2AUnsupportedOperation,
)
from a2a.follow_policy import (
    BLOCKING,
    FOLLOWED_BY,
    LEASE_MARGIN,
    LIST,
    POLL,
    PUSH,
    STREAM,
    base_interval,
    can_subscribe,
    follow_mode,
    long_call_seconds,
    schedule_poll,
)
from a2a.listing_models import AgentListing
from a2a.models import Task
from a2a.states import ACTIVE_STATES, NextAction, TaskState, Transport
from a2a.task_actions import handle_send_failure
from a2a.transports import AgentReply
from agent_profiles.interfaces import CallTarget

log = logging.getLogger(__name__)


def _target(task: Task, *, first_call: bool = False) -> CallTarget:
    return agent_registry.target_for(task.agent, first_call=first_call)


def _outcome(task: Task, error: A2ACallError | None) -> None:
    """Feed the call's outcome to the agent's health (a credential problem shows there)."""
    agent_registry.record_call_outcome(task.agent, error)


def _apply_timeout(task: Task, target: CallTarget, followup: bool) -> None:
    """The agent's ``timeoutMs`` replaces ``A2A_TASK_TIMEOUT`` for this task's deadline."""
    if not target.timeout_seconds or target.timeout_seconds <= 0:
        return
    start = timezone.now() if followup else task.created_at
    deadline = start + timedelta(seconds=target.timeout_seconds)
    if deadline != task.deadline_at:
        task.note(deadline_at=deadline)


# --- send ---------------------------------------------------------------------------


def send(task: Task) -> None:
    """Send the task's outbound message (a new task, a re-send or a follow-up), within
    the agent's sends in flight (:mod:`a2a.send_gate`) unless it is a long call."""
    no_polling = not task.agent.polling or bool((task.metadata or {}).get("noPolling"))
    if no_polling:
        _send(task)
        return
    with send_gate.slot(task.agent_id) as got:
        if got:
            _send(task)
        else:
            task.defer(send_gate.DEFER_SECONDS)


def _send(task: Task) -> None:
    message = task.outbound_message or {}
    followup = bool(message.get("taskId"))
    state_before = task.state
    counted = followup  # a follow-up is part of the current attempt
    took = 0.0
    try:
        target = _target(task, first_call=not followup)
        transport = transports.transport_for(target)
        _apply_timeout(task, target, followup)
        mode = follow_mode(task, target)
        push = _start_attempt(task, target, mode, followup)
        counted = True
        if mode == STREAM:
            seconds = long_call_seconds(task)
            task.extend_lease(seconds + LEASE_MARGIN)
            _follow_events(task, target, transport.stream(message, timeout=seconds), sending=True)
            return
        if mode == BLOCKING:
            seconds = long_call_seconds(task)
            task.extend_lease(seconds + LEASE_MARGIN)
            reply = transport.send(message, blocking=True, timeout=seconds)
        else:
            began = time.monotonic()
            reply = transport.send(message, push=push)
            took = time.monotonic() - began
    except A2ACallError as exc:
        if not counted:  # failed before the attempt was recorded: it still counts
            task.note(attempts=task.attempts + 1)
        _outcome(task, exc)
        handle_send_failure(task, exc)
        return
    _answered(task)
    news: dict[str, Any] = {}  # the agent's task id, above all: written with the schedule
    try:
        apply_agent_reply(
            task, task_json=reply.task, message=reply.message, via="a2a", pending=news
        )
    except A2ACallError as exc:
        if news:  # what the agent told us is kept (its task id above all)
            task.note(**news)
        handle_send_failure(task, exc)
        return
    after_answer(task, target, reply, state_before, mode, news)
    if mode == POLL:  # now that the agent's task id is recorded
        agent_listing.cover_send(task, target, reply, took)


def _start_attempt(task: Task, target: CallTarget, mode: str, followup: bool) -> Any:
    """Record a first send as a new attempt, and how the task is followed
    (``metadata.followedBy``), in one write before the agent can answer; returns the push
    config for an agent that pushes (else None)."""
    pushes = (
        mode == POLL
        and not followup
        and target.push_notifications
        and settings.AGENT_PUSH_ENABLED
        and agent_push_tokens.webhook_reachable(target)
    )
    listed = mode == POLL and not pushes and agent_listing.lists(target)
    how = PUSH if pushes else LIST if listed else mode
    fields: dict[str, Any] = {}
    if not followup:
        fields["attempts"] = task.attempts + 1
        if (task.metadata or {}).get(FOLLOWED_BY) != how:
            fields["metadata"] = {**(task.metadata or {}), FOLLOWED_BY: how}
    if fields:
        task.note(**fields)
    if agent_listing.follows(task, target):
        AgentListing.follow(task.agent_id)  # before the agent can answer: see agent_listing
    return agent_push_tokens.push_config(task) if pushes else None


def _answered(task: Task) -> None:
    """The agent answered: clear send failures, note it as seen (at most every 30 s)."""
    _outcome(task, None)
    metadata = task.metadata or {}
    if metadata.get("sendFailures") or task.error:
        task.note(metadata={**metadata, "sendFailures": 0}, error=None)
    seen = task.agent.last_seen_at
    if seen is None or (timezone.now() - seen).total_seconds() > 30:
        task.agent.touch()


def after_answer(
    task: Task,
    target: CallTarget,
    reply: AgentReply,
    state_before: str,
    mode: str,
    news: dict[str, Any] | None = None,
) -> None:
    """Keep following a task that is still active; tell the agent if we canceled meanwhile.

    ``task`` is current: transitions update it, and a lost compare-and-set reloads it.
    ``news``: fields of the answer not written yet (``pending`` of
    :func:`~a2a.agent_updates.apply_agent_update`), written with the schedule: one UPDATE
    where there were two for every answer that leaves the task in its state.
    """
    news = dict(news or {})
    if task.state in ACTIVE_STATES and task.transport == Transport.A2A:
        if mode == POLL:
            grow = task.state == state_before
            if schedule_poll(task, target, grow=grow, retry_after=reply.retry_after, also=news):
                return
        elif task.schedule(
            NextAction.FOLLOW, base_interval(task, target), if_state=task.state, **news
        ):
            return
        task.refresh_from_db()  # someone changed it meanwhile (a cancel, or a push)
        news = _still_news(task, news)
        if (
            mode == POLL
            and task.state in ACTIVE_STATES
            and task.transport == Transport.A2A
            and schedule_poll(task, target, grow=False, retry_after=reply.retry_after, also=news)
        ):
            # The agent's push moved the task while our call was on the wire: it goes on
            # from the state the push left (never the send again).
            return
    if news:
        task.note(**news)
    if task.state == TaskState.CANCELED and task.remote_task_id and not task.next_action:
        # Canceled while our call was on the wire: the agent has a task now; stop it.
        task.schedule(NextAction.CANCEL)
        queue_processing(task.pk)
    elif task.lease_until is not None:
        task.release()


def _still_news(task: Task, news: dict[str, Any]) -> dict[str, Any]:
    """The fields of ``news`` the task, read again, does not hold yet (a push that beat
    the send's answer wrote the agent's task id already)."""
    return {name: value for name, value in news.items() if getattr(task, name) != value}


# --- poll -----------------------------------------------------------------------------


def poll(task: Task) -> None:
    """Ask the agent for its task (``GetTask``)."""
    state_before = task.state
    target = _target(task)
    news: dict[str, Any] = {}
    try:
        reply = transports.transport_for(target).get_task(task.remote_task_id)
        if task.error:  # an earlier transient poll error: the agent answers again
            task.note(error=None, if_state=task.state)
        apply_agent_reply(task, task_json=reply.task, message=None, via="a2a", pending=news)
    except A2AUnsupportedOperation as exc:
        no_polling(task, target, exc)
        return
    except A2ACallError as exc:
        _outcome(task, exc)
        poll_failed(task, target, exc)
        return
    after_answer(task, target, reply, state_before, POLL, news)


def poll_failed(task: Task, target: CallTarget, exc: A2ACallError) -> None:
    """Transient → keep polling (the deadline bounds it); otherwise the task fails."""
    if exc.transient:
        task.note(error=exc.as_error(), if_state=task.state)
        schedule_poll(task, target, grow=True, retry_after=exc.retry_after)
        return
    task.fail(
        exc.code,
        f"Lost track of the task at agent '{task.agent_id}': {exc.message}",
        exc.as_error()["details"],
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
        _cannot_follow(task, metadata)
        return
    queue_processing(task.pk)


def _cannot_follow(task: Task, metadata: dict[str, Any]) -> None:
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


# --- follow a stream ----------------------------------------------------------------------


def follow(task: Task) -> None:
    """Follow the agent's task over a stream (``SubscribeToTask``) for a while."""
    target = _target(task)
    if not can_subscribe(task, target):
        _cannot_follow(task, dict(task.metadata or {}))
        return
    seconds = long_call_seconds(task)
    task.extend_lease(seconds + LEASE_MARGIN)
    events = transports.transport_for(target).subscribe(task.remote_task_id, timeout=seconds)
    _follow_events(task, target, events, sending=False)


def _follow_events(
    task: Task, target: CallTarget, events: Iterator[AgentReply], *, sending: bool
) -> None:
    """Apply the stream's events; then schedule what comes next.

    An event that only adds artifacts (the status is the one last applied) is applied
    at most every ``A2A_STREAM_APPLY_INTERVAL`` seconds: each apply rewrites the task's
    artifacts, so a stream of many small chunks would cost their square. Each event is
    the stream's whole view of the task, so the next one applied (at the latest when the
    stream ends or breaks) carries those held back; a worker that dies meanwhile picks
    the task up again with a subscribe, which brings the task whole.
    """
    state_before = task.state
    last: AgentReply | None = None
    held: AgentReply | None = None  # the latest event not applied yet
    applied: tuple[Any, float] = (None, 0.0)  # the status applied last, and when
    try:
        for reply in events:
            if last is None and sending:
                _answered(task)
            last = reply
            status = (reply.task or {}).get("status")
            if (
                reply.task is not None
                and status == applied[0]
                and time.monotonic() - applied[1] < settings.A2A_STREAM_APPLY_INTERVAL
            ):
                held = reply
                continue
            held = None
            apply_agent_reply(task, task_json=reply.task, message=reply.message, via="stream")
            applied = (status, time.monotonic())
            if task.state not in ACTIVE_STATES or task.transport != Transport.A2A:
                break
        if held is not None:  # the stream ended: what it held back goes in now
            final, held = held, None
            apply_agent_reply(task, task_json=final.task, message=None, via="stream")
    except A2AUnsupportedOperation as exc:
        _stream_unsupported(task, exc, sending=sending and last is None)
        return
    except A2ACallError as exc:
        if held is not None:  # what came before the break is kept
            _apply_held(task, held)
        if sending and last is None:
            _outcome(task, exc)
            handle_send_failure(task, exc)
            return
        if not exc.transient and not task.is_terminal:
            task.fail(
                exc.code,
                f"The stream of agent '{task.agent_id}' broke off: {exc.message}",
                exc.as_error()["details"],
            )
            return
        task.note(error=exc.as_error(), if_state=task.state)
    reply = last or AgentReply()
    after_answer(task, target, reply, state_before, STREAM)


def _apply_held(task: Task, held: AgentReply) -> None:
    """Apply an event held back before the stream broke (its own refusal is only noted:
    the break is what the task's error says)."""
    try:
        apply_agent_reply(task, task_json=held.task, message=None, via="stream")
    except A2ACallError:
        log.warning("task %s: the stream's last held event could not be applied", task.pk)


def _stream_unsupported(task: Task, exc: A2ACallError, *, sending: bool) -> None:
    """The agent refused a stream: ``message:stream`` itself (``sending``), or a subscribe
    (its task may have ended already). A first message is sent again the next way (a
    stream after a failed subscribe, a blocking send after a refused stream); a follow-up
    cannot be, and waits out its deadline with the reason in its error."""
    key = "noStreaming" if sending else "noSubscribe"
    metadata = {**(task.metadata or {}), key: exc.message[:500]}
    if not (task.outbound_message or {}).get("taskId"):
        task.schedule(NextAction.SEND, 0.0, if_state=task.state, metadata=metadata)
        queue_processing(task.pk)
        return
    _cannot_follow(task, metadata)


# --- cancel -------------------------------------------------------------------------------


def cancel(task: Task) -> None:
    """Propagate a cancel to the agent: one try; the outcome is noted in metadata."""
    metadata = dict(task.metadata or {})
    try:
        target = _target(task)
        reply = transports.transport_for(target).cancel(task.remote_task_id)
        metadata["remoteCancel"] = {"at": timezone.now().isoformat(), "state": reply.state}
    except A2ACallError as exc:
        _outcome(task, exc)
        metadata["remoteCancel"] = {"at": timezone.now().isoformat(), "error": exc.as_error()}
    task.cancel_propagated(metadata=metadata)
