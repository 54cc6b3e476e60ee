"""The worker's sends to agents (polls and cancels are :mod:`a2a.agent_polls`; following
a stream is :mod:`a2a.agent_streams`).

Each function takes a task the worker has claimed, drives the agent's transport (chosen
from its :class:`~agent_profiles.interfaces.CallTarget`: binding, version, credentials)
without knowing which one it is, applies the answer with
:func:`a2a.agent_updates.apply_agent_reply` and schedules what comes next through the
task's verbs (:mod:`a2a.agent_answers`). Every path ends by releasing the claim.

How a task is followed, and when it is polled again, is :mod:`a2a.follow_policy`; how
agents that hold their sends are sent to, :mod:`a2a.holding_agents`.

An agent found not to answer ``GetTask`` (HTTP 404/405/501, JSON-RPC -32601 or
UnsupportedOperation) is marked "no polling" in the registry and on the task, and the
task is followed the other way at once — never failed for "lost track" while the agent
works
(:func:`a2a.agent_polls.no_polling`).
"""

from __future__ import annotations

import logging
import time
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.utils import timezone

from a2a import (
    agent_answers,
    agent_listing,
    agent_pauses,
    agent_push_tokens,
    agent_reads,
    agent_registry,
    agent_streams,
    holding_agents,
    lease_keeper,
    overtaken_calls,
    send_gate,
    send_watch,
    transports,
)
from a2a.agent_listing import LIST
from a2a.agent_push import FOLLOWED_BY
from a2a.agent_updates import apply_agent_reply
from a2a.exceptions import (
    A2AAnswerLate,
    A2ACallError,
)
from a2a.face.serializers import OUTPUT_MODES
from a2a.follow_policy import (
    BLOCKING,
    POLL,
    PUSH,
    STREAM,
    follow_mode,
    long_call_seconds,
    schedule_poll,
)
from a2a.listing_models import AgentListing
from a2a.models import Task
from a2a.scheduling import task_seconds
from a2a.send_failures import handle_send_failure
from a2a.states import (
    ACTIVE_STATES,
    Transport,
)
from a2a.wire import data_as_text
from agent_profiles.interfaces import CallTarget, takes_json

log = logging.getLogger(__name__)


def _apply_timeout(task: Task, target: CallTarget, followup: bool) -> None:
    """The agent's ``timeoutMs`` replaces ``A2A_TASK_TIMEOUT`` for this task's deadline:
    from the reply for a follow-up, from the attempt's start for a first message."""
    if not target.timeout_seconds or target.timeout_seconds <= 0:
        return
    start = timezone.now() if followup else _attempt_began(task)
    deadline = start + timedelta(seconds=task_seconds(target.timeout_seconds))
    if deadline != task.deadline_at:
        task.note(deadline_at=deadline)


def _attempt_began(task: Task) -> datetime:
    """When the task's current attempt began: its creation, or the last person's retry or
    reassignment (each a fresh attempt whose deadline starts again; from the creation, a
    task retried later than ``timeoutMs`` after it was sent with its deadline past)."""
    began = task.created_at
    metadata = task.metadata or {}
    for key in ("retries", "reassignments"):
        steps = metadata.get(key)
        if isinstance(steps, list) and steps and isinstance(steps[-1], dict):
            try:
                began = max(began, datetime.fromisoformat(str(steps[-1].get("at"))))
            except (TypeError, ValueError):
                continue  # an edited row: the creation stands
    return began


# --- send ---------------------------------------------------------------------------


def send(task: Task) -> None:
    """Send the task's outbound message (a new task, a re-send or a follow-up), within
    the agent's sends in flight (:mod:`a2a.send_gate`) unless it is a long call
    (:mod:`a2a.long_calls` bounds those); not before the end of a pause the agent asked
    for (:mod:`a2a.agent_pauses`)."""
    no_polling = not task.agent.polling or bool((task.metadata or {}).get("noPolling"))
    if not no_polling and _agent_has_it(task):  # no call: followed (its poll obeys the pause)
        return
    paused = agent_pauses.pause_answer(task)
    if paused is not None:  # the agent asked every caller to wait: not called now
        handle_send_failure(task, paused)
        return
    if no_polling:
        _send(task)
        return
    if holding_agents.holds(task):  # a long call: bounded by a2a.long_calls, not by send slots
        _send(task)
        return
    with send_gate.slot(task.agent_id) as got:
        if got:
            _send(task)
        else:
            task.defer(send_gate.DEFER_SECONDS)


# Set when a first message is sent again another way (a stream, a blocking send) on
# purpose, though the agent's task id may be known: those re-sends stand.
_RESENT_ANOTHER_WAY = ("noPolling", "noStreaming", "noSubscribe")


def _agent_has_it(task: Task) -> bool:
    """A first message waits to be sent again after its send found no answer (a timeout),
    but the agent's task for it is known meanwhile: the agent pushed about it. The agent
    has the message, so sending it again would have it do the work twice, and its pushes
    for the first task would be refused as an old attempt's: the task is followed
    instead (a poll at the interval its way of following allows). True then."""
    metadata = task.metadata or {}
    if (
        not task.remote_task_id
        or (task.outbound_message or {}).get("taskId")
        or any(metadata.get(key) for key in _RESENT_ANOTHER_WAY)
    ):
        return False
    target = agent_answers.target_of(task)
    if follow_mode(task, target) != POLL:
        return False
    clean = {"error": None, "metadata": {**metadata, "sendFailures": 0}}
    followed = schedule_poll(task, target, grow=False, also=clean)
    if not followed:  # a push moved the task since the claim read it
        task.refresh_from_db()
        clean["metadata"] = {**(task.metadata or {}), "sendFailures": 0}
        active = task.state in ACTIVE_STATES and task.transport == Transport.A2A
        followed = active and schedule_poll(task, target, grow=False, also=clean)
        if not followed and task.lease_until is not None:
            task.release()
    if followed:
        log.info(
            "task %s: not sent again, agent %s has it as %s",
            task.pk,
            task.agent_id,
            task.remote_task_id,
        )
    return True


def _send(task: Task) -> None:
    message = task.outbound_message or {}
    followup = bool(message.get("taskId"))
    state_before = task.state
    counted = followup  # a follow-up is part of the current attempt
    took = 0.0
    try:
        target = agent_answers.target_of(task, first_call=not followup)
        if not followup and not takes_json(task.agent, task.skill_id):
            message = data_as_text(message)  # its card is read by now (target_of)
        transport = transports.transport_for(target, output_modes=_output_modes(task))
        _apply_timeout(task, target, followup)
        mode = follow_mode(task, target)
        started, push = _start_attempt(task, target, mode, followup)
        if not started:  # overtaken before the call: nothing goes to the agent
            return
        counted = True
        if mode == STREAM:
            seconds = long_call_seconds(task)
            with lease_keeper.kept(task):
                events = transport.stream(message, timeout=seconds)
                agent_streams.follow_events(task, target, events, sending=True)
            return
        if mode == BLOCKING:
            seconds = long_call_seconds(task)
            with lease_keeper.kept(task):
                reply = transport.send(message, blocking=True, timeout=seconds)
        else:
            began = time.monotonic()
            if holding_agents.holds(task):
                reply = holding_agents.send_held(task, transport, message, push)
            elif send_watch.may_hold(task):
                reply = send_watch.send(task, transport, message, push)  # it may hold it
                quick = time.monotonic() - began < settings.A2A_HTTP_TIMEOUT
                if reply.state in ACTIVE_STATES and quick:
                    agent_registry.mark_early_return_seen(task.agent)
            else:
                reply = transport.send(message, push=push)
            took = time.monotonic() - began
    except A2ACallError as exc:
        if not counted:  # failed before the attempt was recorded: it still counts
            task.count_attempt()
        agent_answers.outcome(task, exc)
        if isinstance(exc, A2AAnswerLate) and mode == POLL and target.early_return:
            holding_agents.holds_sends(task, target, exc)
        if followup and agent_reads.read_after_refusal(task, exc):
            return
        agent_pauses.pause_if_asked(task.agent_id, exc)  # the agent's other calls wait too
        with overtaken_calls.still_current(task, message.get("messageId")) as still:
            if still:
                handle_send_failure(task, exc)
        if not still:
            overtaken_calls.drop(task, target, None)
        return
    agent_answers.agent_answered(task)
    news: dict[str, Any] = {}  # the agent's task id, above all: written with the schedule
    applied = False
    # Applied only to the attempt it answers: a person may have reassigned or retried the
    # task while the send was on the wire (a2a.overtaken_calls).
    with overtaken_calls.still_current(task, message.get("messageId")) as still:
        if still:
            try:
                # Before the answer is applied: a failure it brings (an invalid output)
                # stands.
                agent_answers.clear_send_failures(task)
                apply_agent_reply(
                    task, task_json=reply.task, message=reply.message, via="a2a", pending=news
                )
            except A2ACallError as exc:  # raised before anything of the answer is written
                handle_send_failure(task, exc)
            else:
                agent_answers.after_answer(task, target, reply, state_before, mode, news)
                applied = True
    if not still:
        overtaken_calls.drop(task, target, reply)
    elif applied and mode == POLL:  # now that the agent's task id is recorded
        agent_listing.cover_send(task, target, reply, took)


def _output_modes(task: Task) -> list[str] | None:
    """The media types the task's caller accepts (an A2A client's ``acceptedOutputModes``,
    kept on the task by the face), for the agent; None for a caller that named none (the
    tasks API's: its output is checked against the skill's schema, whatever the mode)."""
    modes = (task.metadata or {}).get(OUTPUT_MODES)
    if isinstance(modes, list) and modes and all(isinstance(m, str) for m in modes):
        return modes
    return None


def _start_attempt(task: Task, target: CallTarget, mode: str, followup: bool) -> tuple[bool, Any]:
    """Record a first send as a new attempt, and how the task is followed
    (``metadata.followedBy``), in one write before the agent can answer; whether the send
    goes ahead, and the push config for an agent that pushes (else None)."""
    pushes = (
        mode == POLL
        and not followup
        and target.push_notifications
        and settings.AGENT_PUSH_ENABLED
        and agent_push_tokens.webhook_reachable(target)
    )
    listed = mode == POLL and not pushes and agent_listing.lists(target)
    how = PUSH if pushes else LIST if listed else mode
    if not followup:
        fields: dict[str, Any] = {}
        if (task.metadata or {}).get(FOLLOWED_BY) != how:
            fields["metadata"] = {**(task.metadata or {}), FOLLOWED_BY: how}
        if not task.count_attempt(**fields):
            # Retried or reassigned meanwhile (the new attempt is sent on its own), or sent
            # by a worker that claimed the task after this one's claim ran out.
            log.info("task %s: overtaken before its send, not sent", task.pk)
            return False, None
    if agent_listing.follows(task, target):
        AgentListing.follow(task.agent_id)  # before the agent can answer: see agent_listing
    return True, agent_push_tokens.push_config(task) if pushes else None
