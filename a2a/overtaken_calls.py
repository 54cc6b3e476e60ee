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

An answer is overtaken by the agent's own pushes too: its Task is a snapshot the agent
took before the artifact chunks it pushed while the answer was on the wire (each applied
and answered 200 by the webhook). Applied as it came, it replaced the artifacts with the
older ones: the chunks were lost, and a bare COMPLETED pushed after was judged without
them. What such pushes added is kept (:func:`pushed_meanwhile`).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from django.db import connection, transaction

from a2a import transports
from a2a.exceptions import A2ACallError
from a2a.models import Task
from a2a.question_memory import reported_artifacts
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


def pushed_meanwhile(task: Task, artifacts: Any) -> Any:
    """The artifacts to apply from the agent's whole Task (a send's answer, a poll's, a
    read's) for ``task``, the worker's copy: ``artifacts`` (the answer's, canonical)
    merged with those stored now (:func:`merged`), which the copy takes on (a COMPLETED
    without any is judged on them).

    Read again only for a task the agent pushes to (``metadata.followedBy``): no other
    task's artifacts change but through its worker, and polls run for every task in
    flight. A pushed task is polled at the safety net's interval (a minute, backing off),
    so the read costs one query a minute at most. Called under the row lock of
    :func:`still_current` on PostgreSQL: no push lands between this read and the answer's
    write. On SQLite, as there, a push has the few milliseconds between them."""
    # They import the push webhook, and so us.
    from a2a.agent_push import FOLLOWED_BY
    from a2a.follow_policy import PUSH

    if (task.metadata or {}).get(FOLLOWED_BY) != PUSH or task.is_terminal:
        return artifacts
    stored = Task.objects.filter(pk=task.pk).values_list("artifacts", flat=True).first()
    if not isinstance(stored, list):  # the task is gone: its write will find no row
        return artifacts
    task.artifacts = stored
    if not isinstance(artifacts, list) or not artifacts:
        return artifacts  # none in the answer: those stored are kept, as on every path
    # Not a question's artifacts a person answered (LangGraph asks in an ``Interrupt``
    # artifact, and leaves it out of its tasks once answered): kept, the old question
    # joined the result's output (failed output_invalid) and the next question.
    return merged(artifacts, stored, reported_artifacts(task))


def merged(answer: list[Any], stored: list[Any], keepable: list[Any] | None = None) -> list[Any]:
    """``answer``'s artifacts, with ``stored`` ones the agent pushed after it took that
    snapshot: one the answer lacks is kept (after the answer's) when ``keepable`` holds
    it (default: any); of one both hold, the stored one is kept when its parts are the
    answer's followed by more (the chunks appended since), else the answer's stands (the
    agent replaced it: the parts alone cannot order the two). Applying the same answer
    again changes nothing."""
    by_id = {_artifact_id(a): a for a in stored if _artifact_id(a) is not None}
    result = [
        by_id[key] if key in by_id and _extends(by_id[key], artifact) else artifact
        for artifact, key in ((a, _artifact_id(a)) for a in answer)
    ]
    answered = {_artifact_id(a) for a in answer} - {None}
    kept = stored if keepable is None else keepable
    return result + [a for a in kept if a not in result and _artifact_id(a) not in answered]


def _artifact_id(artifact: Any) -> str | None:
    value = artifact.get("artifactId") if isinstance(artifact, dict) else None
    return value if isinstance(value, str) else None


def _extends(known: dict[str, Any], artifact: Any) -> bool:
    """Whether ``known``'s parts are ``artifact``'s followed by more (or the same)."""
    parts = artifact.get("parts") if isinstance(artifact, dict) else None
    kept = known.get("parts")
    if not isinstance(parts, list) or not isinstance(kept, list):
        return False
    return len(kept) >= len(parts) and kept[: len(parts)] == parts


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
