"""Sends overtaken by a fresh attempt: the answer to a send that comes back after a
person reassigned or retried the task.

A send is on the wire for up to ``A2A_HTTP_TIMEOUT`` (much longer when the agent holds
it), and a slow agent is just what a person reassigns. The reassign (or a retry after the
deadline failed the task) writes a fresh attempt: SUBMITTED again, a new first message,
no agent task. The worker's copy of the task is still the old attempt's, in the same
state, so the compare-and-sets on the state let the old answer through: the old agent's
task id was written on the new attempt, which then polled the new agent for a task it
never had (failing ``remote_task_not_found``) instead of sending to it; a failure
rescheduled or failed the new attempt, blaming the old agent.

So what a send brings back is applied only while the task is still the attempt it was
sent for (:func:`still_sent`): the same agent, and the same outbound message (a fresh
attempt, and a person's reply, write a new one). Otherwise it is dropped, and an agent
task it started is canceled at once (:func:`drop`), since nothing follows it any more.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from django.db import transaction

from a2a import transports
from a2a.exceptions import A2ACallError
from a2a.models import Task
from a2a.states import TERMINAL_STATES
from a2a.transports.base import AgentReply
from a2a.transports.quoting import quoted
from agent_profiles.interfaces import CallTarget

log = logging.getLogger(__name__)

# Seconds the overtaken agent gets to hear about the cancel (the worker's thread waits).
CANCEL_TIMEOUT = 3.0


@contextmanager
def still_sent(task: Task, message: dict[str, Any]) -> Iterator[bool]:
    """A transaction in which the task's row is locked (on SQLite the ``IMMEDIATE``
    transaction holds the write lock) and whether it is still the attempt ``message``
    (the outbound message as the worker sent it) was sent for: the answer's writes are
    made in it, so no reassign or retry slips in between the check and them."""
    with transaction.atomic():
        row = (
            Task.objects.select_for_update()
            .filter(pk=task.pk)
            .values_list("agent_id", "outbound_message__messageId")
            .first()
        )
        yield row is not None and row == (task.agent_id, message.get("messageId"))


def drop(task: Task, target: CallTarget, reply: AgentReply | None) -> None:
    """The answer to an overtaken send is not applied; the agent's task it names, still
    running, is canceled (best effort: one try)."""
    remote = reply.task if reply is not None and isinstance(reply.task, dict) else {}
    rid = remote.get("id") if isinstance(remote.get("id"), str) else ""
    log.info(
        "task %s: the answer of agent %s to an earlier attempt's send was dropped (the task "
        "was reassigned or retried meanwhile)%s",
        task.pk,
        target.agent_id,
        f"; its task {quoted(rid)} is canceled" if rid else "",
    )
    if not rid or (reply is not None and reply.state in TERMINAL_STATES):
        return
    try:
        transports.transport_for(target).cancel(rid, timeout=CANCEL_TIMEOUT)
    except A2ACallError as exc:
        log.info(
            "task %s: agent %s did not cancel its task %s of an earlier attempt: %s",
            task.pk,
            target.agent_id,
            quoted(rid),
            exc.code,
        )
