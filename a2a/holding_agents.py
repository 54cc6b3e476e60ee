"""Agents that hold a send until their task ends or asks, whatever ``returnImmediately``
says: LangGraph's server, and any a2a-sdk agent whose executor reports nothing before its
end (a2a-sdk holds the send until the executor's first event).

Such an agent is found out when a send asking it to return at once gets no answer in time
(:func:`holds_sends`; a send made where it can be waited for is waited for, not sent
again: :mod:`a2a.send_watch`). From then on each of its sends is a long call
(:func:`send_held`): it starts by a stream when the agent streams, or waits for the
answer when it does not, instead of timing out and sending the work again.
"""

from __future__ import annotations

import time
from typing import Any

from django.conf import settings

from a2a import agent_registry, lease_keeper
from a2a.exceptions import A2AAnswerLate, A2ACallError, A2AProtocolError, A2AUnsupportedOperation
from a2a.follow_policy import long_call_seconds
from a2a.models import Task
from a2a.states import ACTIVE_STATES
from a2a.transports.base import AgentReply, AgentTransport
from agent_profiles.interfaces import CallTarget


def holds(task: Task) -> bool:
    """Whether the task's agent is known to hold its sends (:func:`holds_sends`) and is
    polled: each of its sends is a long call (:func:`send_held`), on a thread of its own
    (:mod:`a2a.long_calls`), and takes no send slot."""
    agent = task.agent
    return not agent.early_return and agent.polling


def send_held(
    task: Task, transport: AgentTransport, message: dict[str, Any], push: dict[str, Any] | None
) -> AgentReply:
    """Send to an agent that holds its sends: by a stream when it streams
    (:func:`send_to_holder`), else as a send that waits for its answer as long as the
    task may take. Either way it is sent once, not again at every retry while the agent
    works on it; the claim is kept while it waits (:mod:`a2a.lease_keeper`: another
    worker taking it over would send the message again)."""
    seconds = long_call_seconds(task)
    no_streaming = bool((task.metadata or {}).get("noStreaming"))
    with lease_keeper.kept(task):
        if push is None and task.agent.streaming and not no_streaming:
            return send_to_holder(task, transport, message, seconds)
        return transport.send(message, push=push, timeout=seconds)


def holds_sends(task: Task, target: CallTarget, exc: A2AAnswerLate) -> None:
    """A send asking the agent to return at once got no answer in time: the agent may
    have the message and be working on it, holding the answer until the task ends or asks
    (LangGraph's server does, whatever ``returnImmediately`` says; so does any a2a-sdk
    agent whose executor reports nothing before its end). The agent is marked in the
    registry: its next sends start by a stream (:func:`send_to_holder`), so the platform
    learns the agent's task id at its first event, or, when it does not stream, wait for
    the answer (:func:`send_held`), instead of timing out and sending the work again. An
    agent seen to answer such a send with its task in flight honours the field: its
    timeout is load, not a hold, and it is not marked."""
    mark_holder(
        task, f"no answer within {settings.A2A_HTTP_TIMEOUT:g} s (A2A_HTTP_TIMEOUT): {exc.message}"
    )


def mark_holder(task: Task, outcome: str) -> None:
    """Mark the task's agent a holder (:func:`holds_sends`): its send asking to return at
    once had ``outcome``. Not an agent seen to return early."""
    if task.agent.early_return_seen:
        return
    what = "reply" if (task.outbound_message or {}).get("taskId") else "new task's message"
    agent_registry.mark_no_early_return(
        task.agent,
        f"A send of a {what} asking it to return at once (returnImmediately) got {outcome}",
    )


def send_to_holder(
    task: Task, transport: AgentTransport, message: dict[str, Any], seconds: float
) -> AgentReply:
    """Send to an agent that holds its sends until the task ends (no early return) as a
    stream (``message:stream`` / ``SendStreamingMessage``), read until its first event,
    which names the agent's task, and then closed (past ``A2A_HTTP_TIMEOUT``, at once): a
    task that ends or asks by then is known whole, with its question, result or failure
    text (LangGraph's ``GetTask`` has none of them); a longer one is followed as any
    polled task (listing, polls) while the agent works on (closing the stream does not
    cancel it; LangGraph's runs go on).

    The first event may wait as long as the task: LangGraph's comes once the run leaves
    its queue, an a2a-sdk agent's once its executor first reports (for a samples' agent,
    its answer). So the stream is read for up to ``seconds`` (a long call's time), keep-
    alives or not. A stream the agent refuses becomes a send waiting as long.
    """
    until = time.monotonic() + settings.A2A_HTTP_TIMEOUT
    events = transport.stream(message, timeout=seconds, until=until, total=seconds)
    last: AgentReply | None = None
    try:
        for reply in events:
            last = reply
            if reply.state not in ACTIVE_STATES:
                break  # ended, or asks: the whole answer
    except A2ACallError as exc:
        if last is None and isinstance(exc, A2AUnsupportedOperation):
            task.note(metadata={**(task.metadata or {}), "noStreaming": exc.message[:500]})
            return transport.send(message, timeout=seconds)
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
