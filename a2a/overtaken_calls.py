"""Calls overtaken by a fresh attempt: the answer to a send, a poll, a stream or the
deadline's last read that comes back after a person reassigned or retried the task.

A call is on the wire for up to ``A2A_HTTP_TIMEOUT`` (much longer when the agent holds
a send or streams), and a slow agent is just what a person reassigns. The reassign (or a
retry after the deadline failed the task) writes a fresh attempt: SUBMITTED again, a new
first message, no agent task. The worker's copy of the task is still the old attempt's,
often in the same state, so the compare-and-sets on the state let the old answer through:
the old agent's task id was written on the new attempt, which then polled the new agent
for a task it never had (failing ``remote_task_not_found``) instead of sending to it; a
poll's answer replaced the new attempt's send by a poll, or showed the old agent's
question; a failure rescheduled or failed the new attempt, blaming the old agent.

So what a call brings back is applied only while the task is still what the call was
about (:func:`still_current`): the same agent and, once the agent's task is known, the
same agent task; before that (a first message on its way), the same outbound message (a
fresh attempt, and a person's reply, write a new one). Otherwise it is dropped; an agent
task a dropped send started, which nothing follows, is canceled at once (:func:`drop`).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager

from django.db import connection, transaction

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
def still_current(task: Task, message_id: str | None = None) -> Iterator[bool]:
    """Whether the task is still what the worker's call was about: the agent of ``task``
    (the worker's copy) and its agent task, or, while that is not known, the first
    message ``message_id`` (as sent). The answer's writes are made inside.

    On PostgreSQL inside a transaction that locks the row: no reassign or retry slips in
    between the check and the writes. On SQLite (the embedded mode) a plain read: its
    lock is the whole database's, and holding it through an answer's application (the
    answer parsed, checked, validated) took the instant tasks from 47% of a bare client to
    32-34% (docs/performance-history.md); a person's move then has the few milliseconds
    between the read and the answer's writes to land in, instead of the whole call."""
    about = {"agent_id": task.agent_id}
    if task.remote_task_id:
        about["remote_task_id"] = task.remote_task_id
    elif message_id is not None:
        # A key lookup compares JSON values on every backend (a messageId such as "12345"
        # read back through values() would come back a number on SQLite).
        about["outbound_message__messageId"] = message_id
    if connection.vendor == "sqlite":
        yield Task.objects.filter(pk=task.pk, **about).exists()
        return
    with transaction.atomic():
        rows = Task.objects.select_for_update().filter(pk=task.pk, **about)
        yield rows.values_list("pk", flat=True).first() is not None


def drop(task: Task, target: CallTarget, reply: AgentReply | None, what: str = "send") -> None:
    """The answer to an overtaken call is not applied; an agent task it names that no
    platform task follows now (the send started it for the earlier attempt) is canceled
    (best effort: one try)."""
    remote = reply.task if reply is not None and isinstance(reply.task, dict) else {}
    rid = remote.get("id") if isinstance(remote.get("id"), str) else ""
    orphan = bool(rid) and what == "send" and not _ended(reply)
    if orphan:
        # Still followed (a push named it, and a person's reply goes to it next): kept.
        orphan = not Task.objects.filter(
            pk=task.pk, agent_id=target.agent_id, remote_task_id=rid
        ).exists()
    log.info(
        "task %s: the answer of agent %s to an earlier %s was dropped (the task was "
        "reassigned, retried or answered meanwhile)%s",
        task.pk,
        target.agent_id,
        what,
        f"; its task {quoted(rid)} is canceled" if orphan else "",
    )
    if not orphan:
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


def _ended(reply: AgentReply | None) -> bool:
    """Whether the answer says its agent task ended already (nothing to cancel)."""
    return reply is not None and reply.state in TERMINAL_STATES
