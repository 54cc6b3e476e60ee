"""Agents that hold a send until their task ends or asks, whatever ``returnImmediately``
says: LangGraph's server, and any a2a-sdk agent whose executor reports nothing before its
end (a2a-sdk holds the send until the executor's first event).

Such an agent is found out when a send asking it to return at once gets no answer in time
(:func:`holds_sends`). From then on its sends start by a stream when it streams
(:func:`send_to_holder`), or wait for the answer on a long call's thread when it does not
(:func:`held_send`), instead of timing out and sending the work again.
"""

from __future__ import annotations

import time
from typing import Any

from django.conf import settings

from a2a import agent_registry
from a2a.exceptions import A2AAnswerLate, A2ACallError, A2AProtocolError, A2AUnsupportedOperation
from a2a.follow_policy import LEASE_MARGIN, long_call_seconds
from a2a.models import Task
from a2a.states import ACTIVE_STATES
from a2a.transports.base import AgentReply, AgentTransport
from agent_profiles.interfaces import CallTarget


def held_send(task: Task) -> bool:
    """Whether the task's send waits for the agent's answer as long as the task may take
    (a long call, on a thread of its own: :mod:`a2a.long_calls`): the agent holds its
    sends until the task ends or asks (:func:`holds_sends`) and has no stream to start
    them by (its card offers none, or it refused this task's). Sent once, it is not sent
    again at every retry while the agent works on it."""
    agent = task.agent
    if agent.early_return or not agent.polling:
        return False
    return not agent.streaming or bool((task.metadata or {}).get("noStreaming"))


def holds_sends(task: Task, target: CallTarget, exc: A2AAnswerLate) -> None:
    """A send asking the agent to return at once got no answer in time: the agent may
    have the message and be working on it, holding the answer until the task ends or asks
    (LangGraph's server does, whatever ``returnImmediately`` says; so does any a2a-sdk
    agent whose executor reports nothing before its end). The agent is marked in the
    registry: its next sends start by a stream (:func:`send_to_holder`), so the platform
    learns the agent's task id at once, or, when it does not stream, wait for the answer
    (:func:`held_send`), instead of timing out and sending the work again. An agent seen
    to answer such a send with its task in flight honours the field: its timeout is load,
    not a hold, and it is not marked."""
    if task.agent.early_return_seen:
        return
    what = "reply" if (task.outbound_message or {}).get("taskId") else "new task's message"
    agent_registry.mark_no_early_return(
        task.agent,
        f"A send of a {what} asking it to return at once (returnImmediately) got no answer "
        f"within {settings.A2A_HTTP_TIMEOUT:g} s (A2A_HTTP_TIMEOUT): {exc.message}",
    )


def send_to_holder(
    task: Task,
    transport: AgentTransport,
    message: dict[str, Any],
    push: dict[str, Any] | None,
) -> AgentReply:
    """Send to an agent that holds its sends until the task ends (no early return) as a
    stream (``message:stream`` / ``SendStreamingMessage``), read for as long as a send's
    answer may take (``A2A_HTTP_TIMEOUT``) or until its first event, which names the
    agent's task, and then closed: a task that ends or asks by then is known whole, with
    its question, result or failure text (LangGraph's ``GetTask`` has none of them); a
    longer one is followed as any polled task (listing, polls) while the agent works on
    (closing the stream does not cancel it; LangGraph's runs go on).

    The first event may wait as long as the agent's queue: the read timeout counts
    between two reads (LangGraph sends a comment every 5 s meanwhile), up to a long
    call's time (``A2A_LONG_CALL_MAX``, the deadline), for which the claim is extended
    (another worker taking it over would send the message again). A send that carries a
    push config (a stream's request has none) or whose stream the agent refused goes as
    a plain send.
    """
    if push is not None or (task.metadata or {}).get("noStreaming"):
        return transport.send(message, push=push)
    seconds = long_call_seconds(task)
    task.extend_lease(seconds + LEASE_MARGIN)
    until = time.monotonic() + settings.A2A_HTTP_TIMEOUT
    events = transport.stream(
        message, timeout=settings.A2A_HTTP_TIMEOUT, until=until, total=seconds
    )
    last: AgentReply | None = None
    try:
        for reply in events:
            last = reply
            if reply.state not in ACTIVE_STATES:
                break  # ended, or asks: the whole answer
    except A2ACallError as exc:
        if last is None and isinstance(exc, A2AUnsupportedOperation):
            task.note(metadata={**(task.metadata or {}), "noStreaming": exc.message[:500]})
            return transport.send(message, push=push)
        if last is None:
            raise
        # The stream broke after it named the task: that much is known, the rest polled.
    finally:
        events.close()  # the request's connection; the agent's task goes on
    if last is None:
        raise A2AProtocolError(
            f"Agent '{task.agent_id}' closed its stream without an event naming its task."
        )
    return last
