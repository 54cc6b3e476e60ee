"""Agents pushing to the platform: applying what arrives.

When an agent's card offers push notifications, the send carries a webhook of its own per
task and attempt, with a token (:mod:`a2a.agent_push_tokens`). The webhook
(:mod:`a2a.agent_push_asgi`) reads the body (:func:`a2a.agent_push_body.parse`: an A2A
``StreamResponse`` — ``task``, ``statusUpdate``, ``artifactUpdate`` or ``message`` — or
the bare Task / ``kind``-tagged events of A2A 0.3) and :func:`apply` ties it to the
platform task and the agent's task id, then goes through the one agent-update mapping
polling uses (:func:`a2a.agent_updates.apply_agent_update`): a COMPLETED still has its output
validated, and a COMPLETED that brings no artifacts (none pushed before either) makes the
worker read the task once with ``GetTask``. It is idempotent (but for appended artifact
chunks: they carry no id, and the same chunk may come twice on purpose, so a chunk pushed
again is appended again; a whole artifact or Task pushed replaces them) and order-safe: a status
whose timestamp is older than the latest one applied, a WORKING while the platform waits
for a person's answer, and anything for a finished task but a repeat of its final state
are refused with ``409`` and change nothing. A push whose artifacts would take the
task's past ``TASK_ARTIFACTS_MAX_BYTES`` fails the task instead (``413
artifacts_too_large``); a pushed message beyond ``TASK_AGENT_MESSAGES_MAX`` of the task's
is refused (``409 too_many_messages``) and the task goes on. Polling stays as the safety
net, from ``AGENT_PUSH_POLL_INTERVAL`` on (backing off).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.conf import settings
from django.db import connection, transaction

from a2a import answer_parts, rows
from a2a.agent_push_body import Push, status_time
from a2a.agent_updates import apply_agent_update, keep_agent_message, refuse_oversize_artifacts
from a2a.hints import queue_processing
from a2a.models import Task
from a2a.question_memory import reported_artifacts
from a2a.states import (
    ACTIVE_STATES,
    INTERRUPTED_STATES,
    TERMINAL_STATES,
    TaskState,
    Transport,
    normalize_state,
)
from a2a.transports.quoting import quoted
from platform_site.errors import Conflict, NotFound, PayloadTooLarge

# Metadata key recording how the platform follows a task: "push", "stream" or "poll".
FOLLOWED_BY = "followedBy"
# Metadata key: the time of the latest status pushed by the task's agent, which a pushed
# status must not be older than. An attempt's own: a fresh attempt drops it (another
# agent's clock, or the old agent task's, must not judge the new attempt's pushes).
STATUS_AT = "agentStatusAt"


# --- refusals ------------------------------------------------------------------------------


class StaleUpdate(Conflict):
    code = "stale_update"


class TaskFinished(Conflict):
    code = "task_finished"


class WrongTask(Conflict):
    code = "wrong_task"


class TooManyMessages(Conflict):
    code = "too_many_messages"


class ArtifactsTooLarge(PayloadTooLarge):
    """The push would take the task's artifacts past ``TASK_ARTIFACTS_MAX_BYTES``: the
    task failed (committed before this is raised) and the push's artifacts were not kept."""

    code = "artifacts_too_large"


# --- applying it ---------------------------------------------------------------------------


@dataclass
class Applied:
    """The webhook's answer: the task's state now, and whether a GetTask was asked for."""

    state: str
    read_back: bool = False
    too_large: int | None = None  # the artifacts' size, when refused for it


def legacy_push(task_id: uuid.UUID) -> Applied:
    """A push to the task's webhook address of before an upgrade (see
    :class:`~a2a.agent_push_tokens.Hook`): its body is not applied, but an active task
    the agent holds over A2A is polled now, so the news is read within one pass instead
    of at a safety-net poll backed off to minutes (``A2A_SAFETY_POLL_INTERVAL_MAX``)."""
    task = _read(task_id, lock=False)
    if (
        task.state in ACTIVE_STATES
        and task.transport == Transport.A2A
        and task.remote_task_id
        and task.poll_soon(over_send=False)  # it may come from the agent of an old attempt
    ):
        queue_processing(task.pk)
    return Applied(state=task.state, read_back=True)


def _read(task_id: uuid.UUID, *, lock: bool) -> Task:
    """The task row alone (the skill is read only if a COMPLETED needs its schema);
    ``lock``: under its row lock (on SQLite the transaction holds the write lock)."""
    task = rows.task(task_id, lock=lock)
    if task is None:
        raise NotFound(f"No task {task_id}.", {"taskId": str(task_id)})
    return task


def _check_ties(
    task: Task, push: Push, attempt: int, agent_id: str | None, via: str = "push"
) -> None:
    """Refuse a push that is not this webhook's agent (``None``: the task's own), attempt
    or agent task. A webhook's ``attempt`` is the task's push serial when it was given
    (:attr:`~a2a.models.Task.push_serial`), which a retry or reassign moves on at once:
    the old attempt's agent task is refused from then on, before the new send clears or
    records another agent task. A listing's (``via="list"``, its ``attempt`` the task's
    ``attempts``) found the task by its agent task id: one that no longer follows it (a
    person's retry or reassign since the rows were read) is another attempt, whatever the
    attempt number says."""
    if via == "list" and push.remote_id != task.remote_task_id:
        raise StaleUpdate(
            f"Task {task.id} no longer follows the agent's task {quoted(push.remote_id)}.",
            {"taskId": str(task.id)},
        )
    if agent_id is not None and agent_id != task.agent_id:
        raise StaleUpdate(
            f"This webhook belongs to agent {agent_id!r}; task {task.id} was reassigned to "
            "another agent since.",
            {"taskId": str(task.id), "agentId": agent_id},
        )
    current = max(1, int(task.attempts or 0)) if via == "list" else task.push_serial
    if attempt != current:
        raise StaleUpdate(
            f"This webhook ({attempt}) belongs to an earlier attempt of task {task.id}, "
            f"whose webhook is at {current} now (a send, retry or reassign came since).",
            {"taskId": str(task.id), "attempt": attempt},
        )
    if push.remote_id and task.remote_task_id and push.remote_id != task.remote_task_id:
        raise WrongTask(
            f"This webhook follows the agent's task {quoted(task.remote_task_id)}, not "
            f"{quoted(push.remote_id)}.",
            {"taskId": str(task.id)},
        )


def _repeats_the_end(task: Task, push: Push) -> bool:
    """For a finished task: True when ``push`` only repeats its final state (a duplicated
    push, or an end a safety-net poll or a listing noticed first) or trails it (a state of
    work stamped before the task ended), harmless pushes answered as such rather than an
    error in the agent's log; anything else is refused. False for a task still in flight.

    The trailing case is common: an SDK's sender pushes each of a task's events in turn,
    so a WORKING is still on its way when the platform cancels the task or times it out.
    A final state other than the task's is a real disagreement and stays refused."""
    if not task.is_terminal:
        return False
    if push.kind in ("status", "task"):
        state = normalize_state((push.status or {}).get("state"))
        if state == task.state:
            return True
        stamp = status_time(push.status)
        if state not in TERMINAL_STATES and stamp is not None and stamp <= task.state_changed_at:
            return True
    raise TaskFinished(
        f"Task {task.id} is {task.state}, a final state: it takes no more updates.",
        {"taskId": str(task.id), "state": task.state},
    )


def _check_order(task: Task, push: Push) -> datetime | None:
    """The push's status time; 409 when it is older than what was applied, or resumes
    work the platform has not answered yet."""
    stamp = status_time(push.status)
    seen = status_time({"timestamp": (task.metadata or {}).get(STATUS_AT)})
    if stamp is not None and seen is not None and stamp < seen:
        raise StaleUpdate(
            f"The pushed status ({stamp.isoformat()}) is older than the one applied "
            f"({seen.isoformat()}).",
            {"taskId": str(task.id)},
        )
    state = normalize_state((push.status or {}).get("state"))
    # An agent may go on from AUTH_REQUIRED by itself (A2A 1.0, 7.6): a status newer than
    # the question says it did, newer than the last pushed status and than the question's
    # arrival (which a poll may have brought: no pushed time then). Any other active state
    # is older than the question.
    resumed = (
        task.state == TaskState.AUTH_REQUIRED
        and stamp is not None
        and stamp > task.state_changed_at
        and (seen is None or stamp > seen)
    )
    if task.state in INTERRUPTED_STATES and state in ACTIVE_STATES and not resumed:
        raise StaleUpdate(
            f"Task {task.id} waits for a person's answer ({task.state}); a pushed {state} "
            "is older than the question.",
            {"taskId": str(task.id), "state": task.state},
        )
    return stamp


def _changes_nothing(task: Task, push: Push) -> bool:
    """Whether ``push`` only repeats what the task already holds: a status (or a Task
    without artifacts) in the task's state, with no new message and the same agent task.
    Raises the refusals a push can get (:func:`_check_order`)."""
    if push.kind not in ("status", "task") or (push.kind == "task" and push.artifacts):
        return False
    status = push.status or {}
    if normalize_state(status.get("state")) != task.state:
        return False
    message = status.get("message")
    if isinstance(message, dict) and message.get("messageId") != (
        (task.status_message or {}).get("messageId")
    ):
        return False
    if push.remote_id and push.remote_id != task.remote_task_id:
        return False
    _check_order(task, push)
    return True


def _newer_time(task: Task, push: Push) -> datetime | None:
    """The push's status time when it is newer than the latest the task applied."""
    stamp = status_time(push.status)
    seen = status_time({"timestamp": (task.metadata or {}).get(STATUS_AT)})
    return stamp if stamp is not None and (seen is None or stamp > seen) else None


def apply(
    task_id: uuid.UUID,
    attempt: int,
    push: Push,
    *,
    via: str = "push",
    agent_id: str | None = None,
) -> Applied:
    """Apply one push to the platform task (the webhook's database side, and a listing's:
    ``via="list"``, see :mod:`a2a.agent_listing`). ``agent_id``: the agent whose webhook
    it came to (a push of an agent the task was taken from is refused).

    Applied under the task's row lock, in one transaction whose writes are one UPDATE of
    the task (and its event, for a transition); a push that changes nothing writes
    nothing. On SQLite, whose write lock is the whole database's, a status (or a Task)
    that may repeat what the task holds is answered from a plain read first, so repeats
    do not queue behind writers; an artifact or a message always writes, so it goes
    straight to the locked read (its refusals are checked there).
    """
    if connection.vendor != "postgresql" and push.kind in ("status", "task"):
        task = _read(task_id, lock=False)
        _check_ties(task, push, attempt, agent_id, via)
        if _repeats_the_end(task, push) or (
            _changes_nothing(task, push) and _newer_time(task, push) is None
        ):
            return Applied(task.state)
    with transaction.atomic():
        applied = _apply_locked(task_id, attempt, push, via, agent_id)
    if applied.too_large is not None:  # raised after the commit of the task's failure
        limit = settings.TASK_ARTIFACTS_MAX_BYTES
        raise ArtifactsTooLarge(
            f"With this push the task's artifacts would be {applied.too_large} bytes, more "
            f"than the platform keeps ({limit} bytes): the task failed.",
            {"taskId": str(task_id), "maxBytes": limit, "bytes": applied.too_large},
        )
    return applied


def _apply_locked(
    task_id: uuid.UUID, attempt: int, push: Push, via: str, agent_id: str | None
) -> Applied:
    """:func:`apply` under the task's row lock, inside its transaction."""
    task = _read(task_id, lock=True)
    _check_ties(task, push, attempt, agent_id, via)
    if _repeats_the_end(task, push):
        return Applied(task.state)
    if _changes_nothing(task, push):
        newer = _newer_time(task, push)
        if newer is not None:
            # A repeat of the state, stamped later: its time is kept, or a push of the
            # agent's state in between, arriving late, would be taken as newer than all
            # it knows (WORKING, AUTH_REQUIRED, WORKING by itself, pushed in the order
            # first, third, second: the task went back to waiting for a sign-in).
            task.note(metadata={**(task.metadata or {}), STATUS_AT: newer.isoformat()})
        return Applied(task.state)
    if push.kind == "message":
        if push.message is not None:
            _keep_message(task, push.message)
        return Applied(task.state)
    if push.kind == "artifact":
        return _apply_artifact(task, push)
    stamp = _check_order(task, push)
    status = push.status or {}
    state = normalize_state(status.get("state"))
    # Its bytes in standard, padded base64 before it is sized (as apply_agent_update keeps it).
    artifacts = answer_parts.canonical_artifacts(push.artifacts) if push.kind == "task" else None
    if artifacts:
        too_large = refuse_oversize_artifacts(task, artifacts)
        if too_large is not None:
            return Applied(task.state, too_large=too_large)
    seen: dict[str, Any] = {}
    if stamp is not None:
        seen = {"metadata": {**(task.metadata or {}), STATUS_AT: stamp.isoformat()}}
    remote = {"id": push.remote_id, "contextId": push.remote_context}
    if state == TaskState.COMPLETED and not (artifacts or reported_artifacts(task)):
        # Nothing reported since the last question (a question's artifacts are not the
        # result: LangGraph asks with one): the output may be in the agent task's history,
        # which a push does not carry; GetTask reads it.
        return _read_back(task, remote, seen)
    # Sized already: the pushed artifacts above. A COMPLETED without any is judged on
    # those stored (pushed with artifactUpdate), as on every path (apply_agent_update).
    apply_agent_update(
        task, status=status, artifacts=artifacts, remote=remote, via=via, also=seen, sized=True
    )
    return Applied(task.state)


def _keep_message(task: Task, message: dict[str, Any]) -> None:
    """A pushed message joins the task's conversation, up to ``TASK_AGENT_MESSAGES_MAX``
    from the agent (:func:`~a2a.agent_updates.keep_agent_message`, the cap of every path):
    past it, the push is refused (``409``) and the agent told so. Under the task's row
    lock, so two pushes cannot both take the last place."""
    message = answer_parts.canonical_message(message)  # kept as the face serves it
    if not keep_agent_message(task, message):
        limit = settings.TASK_AGENT_MESSAGES_MAX
        raise TooManyMessages(
            f"Task {task.id} holds {limit} messages from its agent, the most the platform "
            "keeps (TASK_AGENT_MESSAGES_MAX); this one was not kept. The task goes on.",
            {"taskId": str(task.id), "maxMessages": limit},
        )


def _apply_artifact(task: Task, push: Push) -> Applied:
    """An ``artifactUpdate``: merged into the task's artifacts, unless that takes them past
    ``TASK_ARTIFACTS_MAX_BYTES`` (the task fails instead)."""
    artifacts = _merged_artifacts(task, push)
    too_large = refuse_oversize_artifacts(task, artifacts)
    if too_large is not None:
        return Applied(task.state, too_large=too_large)
    fields: dict[str, Any] = {"artifacts": artifacts}
    if push.remote_id and not task.remote_task_id:
        fields["remote_task_id"] = push.remote_id
    task.note(if_state=task.state, **fields)
    return Applied(task.state)


def _merged_artifacts(task: Task, push: Push) -> list[Any]:
    """The task's artifacts with the pushed one added, or appended to or replacing the
    one of the same ``artifactId``."""
    artifact = answer_parts.canonical_artifacts([push.artifact or {}])[0]  # kept as served
    artifacts = list(task.artifacts or [])
    artifact_id = artifact.get("artifactId")
    for index, known in enumerate(artifacts):
        if isinstance(known, dict) and artifact_id and known.get("artifactId") == artifact_id:
            if push.append:
                parts = list(known.get("parts") or []) + list(artifact.get("parts") or [])
                artifacts[index] = {**known, "parts": parts}
            else:
                artifacts[index] = artifact
            break
    else:
        artifacts.append(artifact)
    return artifacts


def _read_back(task: Task, remote: dict[str, Any], seen: dict[str, Any]) -> Applied:
    """A COMPLETED without artifacts: the worker reads the task once (GetTask) now."""
    fields = dict(seen)
    pushed_id = remote.get("id")
    if pushed_id and not task.remote_task_id:
        fields["remote_task_id"] = pushed_id
    if fields:
        task.note(**fields)
    if task.remote_task_id and task.poll_soon():
        queue_processing(task.pk)
    return Applied(task.state, read_back=True)


__all__ = [
    "FOLLOWED_BY",
    "STATUS_AT",
    "Applied",
    "ArtifactsTooLarge",
    "StaleUpdate",
    "TaskFinished",
    "TooManyMessages",
    "WrongTask",
    "apply",
]
