"""Following an agent's task over a stream: ``SubscribeToTask``, and a first message sent
as ``message:stream`` (from :mod:`a2a.agent_calls`), for agents that stream but neither
push nor answer ``GetTask`` well enough to be polled (see :mod:`a2a.follow_policy`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from typing import Any

from django.conf import settings

from a2a import agent_answers, agent_pauses, lease_keeper, long_calls, overtaken_calls, transports
from a2a.agent_push import FOLLOWED_BY
from a2a.agent_updates import apply_agent_reply
from a2a.exceptions import (
    A2AAuthError,
    A2ACallError,
    A2AProtocolError,
    A2AUnsupportedOperation,
)
from a2a.follow_policy import (
    STREAM,
    auth_refused,
    base_interval,
    can_subscribe,
    long_call_seconds,
    next_poll,
    schedule_poll,
)
from a2a.hints import queue_processing
from a2a.models import Task
from a2a.send_failures import handle_send_failure
from a2a.states import ACTIVE_STATES, NextAction, TaskState, Transport
from a2a.transports.answers import AgentErrorEvent
from a2a.transports.base import AgentReply
from a2a.transports.stream_view import task_copy
from agent_profiles.interfaces import CallTarget

log = logging.getLogger(__name__)


def follow(task: Task) -> None:
    """Follow the agent's task over a stream (``SubscribeToTask``) for a while."""
    target = agent_answers.target_of(task)
    if not can_subscribe(task, target):
        # The agent stopped streaming (its card says so now, or it refused): a task it
        # may be polled on is polled, not left to run out at its deadline.
        if target.polling and task.remote_task_id:
            schedule_poll(task, target, grow=False)
        else:
            agent_answers.cannot_follow(task, dict(task.metadata or {}))
        return
    seconds = long_call_seconds(task)
    with lease_keeper.kept(task):
        events = transports.transport_for(target).subscribe(task.remote_task_id, timeout=seconds)
        follow_events(task, target, events, sending=False)


class _Overtaken(Exception):
    """The task was reassigned or retried while its stream ran (see
    :mod:`a2a.overtaken_calls`): nothing more of the stream is applied."""

    def __init__(self, last: AgentReply | None) -> None:
        super().__init__("overtaken")
        self.last = last


@contextmanager
def _as_called(task: Task, message_id: str | None, last: AgentReply | None) -> Iterator[None]:
    """The writes inside are made only while the task is what the stream is about, under
    its row's lock; else :class:`_Overtaken` (nothing written)."""
    with overtaken_calls.still_current(task, message_id) as current:
        if not current:
            raise _Overtaken(last)
        yield


def follow_events(
    task: Task, target: CallTarget, events: Iterator[AgentReply], *, sending: bool
) -> None:
    """Apply the stream's events; then schedule what comes next (:func:`_follow_events`),
    only while the task is the attempt the stream is about: a person may reassign or
    retry it meanwhile (:mod:`a2a.overtaken_calls`)."""
    message_id = (task.outbound_message or {}).get("messageId") if sending else None
    try:
        _follow_events(task, target, events, sending=sending, message_id=message_id)
    except _Overtaken as exc:
        first = sending and not (task.outbound_message or {}).get("taskId")
        overtaken_calls.drop(task, target, exc.last, "send" if first else "stream")


def _follow_events(
    task: Task,
    target: CallTarget,
    events: Iterator[AgentReply],
    *,
    sending: bool,
    message_id: str | None,
) -> None:
    """Apply the stream's events; then schedule what comes next.

    An event that only adds artifacts (the status is the one last applied) is applied
    at most every ``A2A_STREAM_APPLY_INTERVAL`` seconds: each apply rewrites the task's
    artifacts, so a stream of many small chunks would cost their square. Each event is
    the stream's whole view of the task, so the next one applied (at the latest when the
    stream ends or breaks) carries those held back; a worker that dies meanwhile picks
    the task up again with a subscribe, which brings the task whole.

    An error event after the stream named its task is the agent's last word: the task
    fails with the agent's error, once (:func:`_agent_error`). A sending stream that ends
    without telling its task's state is an error too, never a subscribe to no task.
    """
    state_before = task.state
    began = time.monotonic()
    failed: A2ACallError | None = None  # a break noted on the task
    last: AgentReply | None = None
    held: AgentReply | None = None  # the latest event not applied yet
    applied: tuple[Any, float] = (None, 0.0)  # the status applied last, and when
    try:
        for reply in events:
            first = last is None
            if first and sending:
                agent_answers.agent_answered(task)
            elif first and auth_refused(task):  # the credential works again
                agent_answers.outcome(task, None)
                task.note(error=None, if_state=task.state)
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
            _apply(task, reply, message_id, with_message=True, sending=sending, first=first)
            applied = (status, time.monotonic())
            if task.transport != Transport.A2A or not (
                task.state in ACTIVE_STATES or _waits_on_stream(task)
            ):
                break
        if held is not None:  # the stream ended: what it held back goes in now
            final, held = held, None
            _apply(task, final, message_id)
    except AgentErrorEvent as exc:
        if held is not None:  # what came before the error is kept
            _apply_held(task, held, message_id)
        with _as_called(task, message_id, last):
            _agent_error(task, exc)
        return
    except A2AUnsupportedOperation as exc:
        with _as_called(task, message_id, last):
            _stream_unsupported(task, exc, sending=sending and last is None)
        return
    except A2ACallError as exc:
        if held is not None:  # what came before the break is kept
            _apply_held(task, held, message_id)
        if sending and last is None:
            agent_answers.outcome(task, exc)
            agent_pauses.pause_if_asked(task.agent_id, exc)  # the agent's other calls wait too
            with _as_called(task, message_id, last):
                handle_send_failure(task, exc)
            return
        with _as_called(task, message_id, last):
            if isinstance(exc, A2AAuthError) and not task.is_terminal:
                _follow_again_later(task, target, exc)
                return
            if not exc.transient and not task.is_terminal:
                task.fail(
                    exc.code,
                    f"The stream of agent '{task.agent_id}' broke off: {exc.message}",
                    exc.as_error()["details"],
                )
                return
            if not (last is not None and _waits_on_stream(task)):
                failed = exc
                task.note(error=exc.as_error(), if_state=task.state)
    if sending and last is None:
        # A 2xx stream that closed before naming its task: nothing to follow (a subscribe
        # needs the agent's task id), and a send again might run the task twice.
        exc = A2AProtocolError(
            f"Agent '{task.agent_id}' closed its stream without an event naming its task."
        )
        agent_answers.outcome(task, exc)
        with _as_called(task, message_id, last):
            handle_send_failure(task, exc)
        return
    # Nothing new: a break, or a stream that closed at once on the task as it was. The
    # next subscribe backs off then, as a poll would (a long stream's end is no news).
    brief = time.monotonic() - began < base_interval(task, target)
    quiet = failed is not None or (brief and task.state == state_before)
    reply = last or AgentReply()
    if failed is not None and failed.retry_after:
        reply = replace(reply, retry_after=failed.retry_after)
    with _as_called(task, message_id, last):
        agent_answers.after_answer(task, target, reply, state_before, STREAM, quiet=quiet)


def _waits_on_stream(task: Task) -> bool:
    """Whether a subscribe goes on while the task waits for authorization: the stream
    began there and still holds the claim (a transition into the wait, which clears it,
    ends the stream; a subscribe follows, which holds it). A2A 1.0 (7.6): an agent that
    got the credential out of band goes on by itself, and SHOULD keep its streams open
    meanwhile, so the subscribe hears it at once (a2a-sdk's does). Silence while it
    waits is no error: when the call's time is up it is subscribed to again. Not when
    long calls to the agent are crowded (:func:`a2a.long_calls.crowded`): people who do
    not sign in would hold the threads its working tasks' streams need; the subscribe
    then ends at the task as it is, and the next one backs off as a poll would."""
    return (
        task.state == TaskState.AUTH_REQUIRED
        and task.next_action == NextAction.FOLLOW
        and task.lease_until is not None
        and not long_calls.crowded(task.agent_id)
    )


def _follow_again_later(task: Task, target: CallTarget, exc: A2AAuthError) -> None:
    """The agent refused the platform's credential (HTTP 401/403) on a subscribe to a task
    it accepted: the task waits in its state, ``agent_auth_failed`` in its ``error``, and
    is subscribed to again with the polls' backoff (:func:`~a2a.follow_policy.next_poll`)
    until its deadline, where it times out naming the refusal. A credential rotated at
    the agent before the platform failed the task at once, the agent's work lost; a new
    credential makes the subscribe due at once (:func:`a2a.follow_policy.credentials_changed`)."""
    agent_answers.outcome(task, exc)
    held = task.lease_until  # this worker's claim
    if task.state in ACTIVE_STATES and task.transport == Transport.A2A:
        delay, interval = next_poll(task, target, grow=True, retry_after=exc.retry_after)
        if task.schedule(
            NextAction.FOLLOW,
            delay,
            if_state=task.state,
            error=exc.as_error(),
            poll_interval=interval,
        ):
            return
    # Moved meanwhile (a push, a person's cancel): what moved it stands, and the claim is
    # let go at once rather than held for the stream's whole lease.
    if held is not None:
        task.release(held=held)  # another worker's later claim stands


def _apply(
    task: Task,
    reply: AgentReply,
    message_id: str | None,
    *,
    with_message: bool = False,
    sending: bool = False,
    first: bool = False,
) -> None:
    """Apply one event: a copy of its task, which the stream's view goes on changing; only
    to the attempt the stream is about (else :class:`_Overtaken`), under its row's lock
    with what goes with it: a sending stream's first event clears the send's failures
    (before it: a failure it brings stands), and once the agent named its task the send
    is marked done (a crash from then on subscribes, never sends again)."""
    task_json = task_copy(reply.task) if reply.task is not None else None
    message = reply.message if with_message else None
    with _as_called(task, message_id, reply):
        if sending and first:
            agent_answers.clear_send_failures(task)
        apply_agent_reply(task, task_json=task_json, message=message, via="stream")
        if sending and task.remote_task_id and task.next_action == NextAction.SEND:
            task.mark_sent()


def _apply_held(task: Task, held: AgentReply, message_id: str | None) -> None:
    """Apply an event held back before the stream broke (its own refusal is only noted:
    the break is what the task's error says)."""
    try:
        _apply(task, held, message_id)
    except A2ACallError:
        log.warning("task %s: the stream's last held event could not be applied", task.pk)


def _agent_error(task: Task, exc: AgentErrorEvent) -> None:
    """The agent ended its task's stream with an error (a2a-sdk's when its executor
    raises): the task fails with the agent's error. Not a break: following again would
    find the task ended (a subscribe is refused then), and the first message is never
    sent again (the agent would run it twice)."""
    if task.is_terminal:
        return  # its last event ended it already (or a person canceled meanwhile)
    task.fail(
        exc.code,
        f"Agent '{task.agent_id}' ended the stream of its task with an error: {exc.message}",
        exc.as_error()["details"],
    )


def _stream_unsupported(task: Task, exc: A2ACallError, *, sending: bool) -> None:
    """The agent refused a stream: ``message:stream`` itself (``sending``), or a subscribe
    (its task may have ended already). A first message is sent again the next way (a
    blocking send after a refused stream; a stream after a failed subscribe, the one way
    left to learn how the task of an agent found unpollable ended) — but not one sent
    over a stream already, whose agent task is known: the agent had it, and sent again it
    would run it twice. That one, and a follow-up, wait out the deadline with the reason
    in their error."""
    key = "noStreaming" if sending else "noSubscribe"
    metadata = {**(task.metadata or {}), key: exc.message[:500]}
    first_message = not (task.outbound_message or {}).get("taskId")
    streamed = (task.metadata or {}).get(FOLLOWED_BY) == STREAM and bool(task.remote_task_id)
    if first_message and (sending or not streamed):
        task.schedule(NextAction.SEND, 0.0, if_state=task.state, metadata=metadata)
        queue_processing(task.pk)
        return
    agent_answers.cannot_follow(task, metadata)
