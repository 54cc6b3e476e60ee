"""Applying an agent's A2A status to a task: the one mapping onto our state machine.

One of the app's business rules (map in :mod:`a2a.services`): :func:`apply_agent_update`
(with the output extraction and ``output_schema`` check on completion),
:func:`apply_agent_reply` (a whole answer: a Task or a bare Message — what polls, streams,
blocking sends and pushes from agents deliver) and :func:`record_message`, which keeps each
message of the conversation once (:func:`keep_agent_message`, an agent's up to
``TASK_AGENT_MESSAGES_MAX``).

Both are idempotent and order-safe: the same update applied twice changes nothing the
second time, news about a task that already ended never moves it again, and a transition
is a compare-and-set on the state the caller saw.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.conf import settings
from django.utils import timezone

from a2a import answer_parts, lookups, observe, overtaken_calls, remote_ids
from a2a.agent_messages import over_the_cap, tell_over_the_cap
from a2a.exceptions import A2AProtocolError
from a2a.hints import queue_processing
from a2a.models import Direction, Task, TaskMessage
from a2a.question_memory import asked_again, asks_anew, judged_on, message_key, wait_ended
from a2a.scheduling import task_seconds
from a2a.states import (
    ACTIVE_STATES,
    INTERRUPTED_STATES,
    NextAction,
    TaskState,
    Transport,
    normalize_state,
)
from a2a.transports.quoting import quoted
from a2a.transports.redaction import redactor
from a2a.wire import (
    artifacts_bytes,
    message_text,
    question_of,
    schema_errors,
    task_output,
)
from agent_profiles.interfaces import call_target
from platform_site.text import find_bad_text


def record_message(task: Task, direction: str, message: dict[str, Any]) -> TaskMessage | None:
    """Add ``message`` to the task's conversation once (keyed by :func:`message_key`)."""
    message_id = message_key(message)
    if TaskMessage.objects.filter(task=task, direction=direction, message_id=message_id).exists():
        return None
    return TaskMessage.objects.create(
        task=task, direction=direction, message_id=message_id, message=message
    )


def keep_agent_message(task: Task, message: dict[str, Any]) -> bool:
    """Record a message from the agent (:func:`record_message`) unless it would take the
    task past ``TASK_AGENT_MESSAGES_MAX`` (:mod:`a2a.agent_messages`, the one cap of every
    path); False then, and nothing stored."""
    if over_the_cap(task, message):
        return False
    record_message(task, Direction.FROM_AGENT, message)
    return True


def _keep_status_message(task: Task, message: dict[str, Any]) -> None:
    """:func:`keep_agent_message`; past the cap, the message is dropped (logged once per
    task) and the status it came with still applies."""
    if not keep_agent_message(task, message):
        tell_over_the_cap(task)


# --- the one mapping from an agent's status to our state machine ---------------------


def apply_agent_reply(
    task: Task,
    *,
    task_json: dict[str, Any] | None,
    message: Any,
    via: str,
    pending: dict[str, Any] | None = None,
) -> Task:
    """Apply an agent's answer — its Task (1.0 shape) or a bare Message — to ``task``.

    A bare Message is the agent's whole answer: its data parts are the output. One whose
    parts are not all A2A Parts is refused before it is kept (:mod:`a2a.answer_parts`);
    one holding text that cannot be stored fails the task (``output_invalid``).
    ``pending``: see :func:`apply_agent_update`. The Task is a snapshot the agent took
    before the pushes that reached us while it was on the wire: what those added to the
    artifacts is kept (:func:`a2a.overtaken_calls.pushed_meanwhile`).
    """
    if task_json is None and isinstance(message, dict):
        answer_parts.refuse(task, answer_parts.message_problem(message))
        message = answer_parts.canonical_message(message)  # its bytes as the face serves them
        # Before it is kept: a NUL or a lone surrogate anywhere in it (its id, metadata, a
        # text part) fails the task once. Stored, PostgreSQL would refuse the write (the
        # message re-sent until internal_error) and SQLite would keep it, completed.
        if answer_parts.refuse_bad_message(task, message):
            return task
        _keep_status_message(task, message)
        artifacts = [{"artifactId": "message", "parts": message.get("parts") or []}]
        status = {"state": TaskState.COMPLETED}
        return apply_agent_update(task, status=status, artifacts=artifacts, remote=None, via=via)
    remote = task_json or {}
    return apply_agent_update(
        task,
        status=remote.get("status") or {},
        artifacts=remote.get("artifacts"),
        remote=remote,
        via=via,
        pending=pending,
        snapshot=True,
    )


def apply_agent_update(
    task: Task,
    *,
    status: dict[str, Any],
    artifacts: list[Any] | None = None,
    remote: dict[str, Any] | None = None,
    via: str,
    also: dict[str, Any] | None = None,
    sized: bool = False,
    pending: dict[str, Any] | None = None,
    snapshot: bool = False,
) -> Task:
    """Apply an agent's A2A TaskStatus (+ artifacts) to ``task``.

    WORKING/SUBMITTED → keep following; INPUT_REQUIRED/AUTH_REQUIRED → the question is
    stored and polling pauses; COMPLETED → the artifacts' data (or, when they carry none,
    the status message's or the last agent message's in ``remote``'s history; their text
    when no part holds a value: :func:`a2a.wire.task_output`) is validated against the
    skill's ``output_schema`` (valid → COMPLETED with ``output``; invalid → FAILED
    ``output_invalid`` with the errors); FAILED/REJECTED/CANCELED → the matching verb.
    An update that carries no artifacts keeps those stored: a COMPLETED without any (an
    a2a-sdk ``TaskUpdater`` adds its artifact, then completes) is judged on the artifacts
    the agent reported before, not on a question's
    (:func:`a2a.question_memory.reported_artifacts`). News about a task that already
    ended is recorded (conversation, remote ids) and otherwise ignored. Raises
    :class:`A2AProtocolError` for a status we cannot read, and, before anything is
    applied, for an answer about another agent task than the one the task
    follows or with an id longer than the platform keeps
    (:func:`a2a.remote_ids.remote_fields`), and for one holding a part that is not an A2A
    1.0 Part (:mod:`a2a.answer_parts`: served again, it would make the caller's whole task
    list unreadable; its bytes are kept in standard, padded base64).
    ``also``: more non-state fields to store in the same write (a push's metadata).
    ``sized``: the caller already held ``artifacts`` to ``TASK_ARTIFACTS_MAX_BYTES``.
    ``pending``: when the agent reports the state the task is in (only news: its ids, a
    status message), those fields are put there instead of written, for the caller to
    write with its next write of the task (a worker's schedule of what follows).
    ``snapshot``: the agent's whole Task, as a worker's call brought it (see
    :func:`apply_agent_reply`).
    """
    observe.agent_update(task, via)  # metrics, the task's trace
    if not isinstance(status, dict):
        raise A2AProtocolError("The agent's task status is not an object.")
    # First: an answer about another agent task (or with an id we cannot keep) must not
    # fail, cancel or complete this one through the checks below.
    remote_fields = remote_ids.remote_fields(task, remote)
    answer_parts.refuse(task, answer_parts.answer_problem(status, artifacts))
    # Kept (and served again) with its bytes in standard, padded base64: an agent may send
    # them URL-safe or unpadded, as ProtoJSON allows; the face's schema does not.
    status, artifacts = answer_parts.canonical_answer(status, artifacts)
    if answer_parts.refuse_bad_text(task, status, artifacts, remote):
        return task
    if snapshot and (artifacts or normalize_state(status.get("state")) == TaskState.COMPLETED):
        # Merged once canonical (a pushed chunk's bytes are), sized as they would be kept.
        artifacts = overtaken_calls.pushed_meanwhile(task, artifacts)
    if not sized and refuse_oversize_artifacts(task, artifacts) is not None:
        return task
    state = normalize_state(status.get("state"))
    if state is None:
        raise A2AProtocolError(
            f"The agent sent an unknown task state {quoted(status.get('state'))}."
        )
    message = status.get("message") if isinstance(status.get("message"), dict) else None
    fields = {**remote_fields, **(also or {})}
    if message is not None:
        _keep_status_message(task, message)
        fields["status_message"] = message
    if isinstance(artifacts, list) and artifacts:
        fields["artifacts"] = artifacts
    if task.is_terminal:
        _update(task, _after_the_end(fields))
        return task
    # The answer to a reply being sent (its history tells an old question from a new one).
    replying = task.next_action == NextAction.SEND and bool(
        (task.outbound_message or {}).get("taskId")
    )
    history = (remote or {}).get("history") if isinstance(remote, dict) else None
    if (
        state in INTERRUPTED_STATES
        and task.state in ACTIVE_STATES
        and asked_again(task, status, history if replying else None, artifacts, replying=replying)
    ):
        # A question a person already answered, reported again before the agent took the
        # answer in (0.3 agents answer a non-blocking reply with the task as it was):
        # stale news, not a new question (nor the status message of the task now).
        fields.pop("status_message", None)
        _update(task, fields)
        return task
    if not _move(task, state, message, artifacts, fields, f"via {via}", pending, history):
        # Someone moved the task first (a person's cancel, say): the state stays theirs,
        # but what the agent told us (its task id above all) is kept.
        _update(task, _after_the_end(fields) if task.is_terminal else fields)
    return task


def refuse_oversize_artifacts(task: Task, artifacts: Any) -> int | None:
    """Fail the task (``artifacts_too_large``, once) when ``artifacts`` are more than
    ``TASK_ARTIFACTS_MAX_BYTES``, and ask the agent to cancel its task; returns their size
    then, else None.

    Each answer of an agent is capped on its own (``AGENT_ANSWER_MAX_BYTES``, one stream
    event; ``AGENT_PUSH_MAX_BYTES``, one push), but appended chunks (a stream's or pushed
    ``artifactUpdate``s) would grow a task's artifacts without end, each one rewriting
    them all. Nothing of the refused artifacts is stored; what was stored before stays.
    """
    if not isinstance(artifacts, list) or not artifacts:
        return None
    size = artifacts_bytes(artifacts)
    limit: int = settings.TASK_ARTIFACTS_MAX_BYTES
    if size <= limit:
        return None
    if not task.is_terminal:
        cancel = bool(task.remote_task_id) and task.transport == Transport.A2A
        fields: dict[str, Any] = {}
        if cancel:  # as for a timeout: the agent's work is of no use now
            fields = {"next_action": NextAction.CANCEL, "next_poll_at": timezone.now()}
        told = " and the agent asked to cancel its task" if cancel else ""
        failed = task.fail(
            "artifacts_too_large",
            f"Agent '{task.agent_id}' sent artifacts of {size} bytes for this task, more than "
            f"the platform keeps ({limit} bytes, TASK_ARTIFACTS_MAX_BYTES); they were "
            f"discarded{told}.",
            {"maxBytes": limit, "bytes": size},
            **fields,
        )
        if failed and cancel:
            queue_processing(task.pk)
    return size


def _move(
    task: Task,
    state: str,
    message: dict[str, Any] | None,
    artifacts: list[Any] | None,
    fields: dict[str, Any],
    via_text: str,
    pending: dict[str, Any] | None = None,
    history: Any = None,
) -> bool:
    """The transition for the agent's ``state``; False when a concurrent change won.
    Without one, the news in ``fields`` go into ``pending`` when given. ``history``: the
    agent task's messages, where a COMPLETED without output in its artifacts may have it."""
    if state in ACTIVE_STATES:
        if task.state in INTERRUPTED_STATES:
            # The agent went on by itself (signed in elsewhere: an AUTH_REQUIRED it
            # left): its time starts again, as after a person's reply, not from before
            # the wait, which may be past already.
            fields.setdefault(
                "deadline_at", timezone.now() + timedelta(seconds=task_timeout(task)[0])
            )
            mine = "metadata" not in fields  # else the caller's (a push's), kept as given
            fields["metadata"] = wait_ended(task, fields.get("metadata") or task.metadata or {})
            # The question is answered, or was not needed any more.
            moved = task.start_work(f"agent reports {state} {via_text}", question=None, **fields)
            if not moved and mine:  # never written over a change that won meanwhile
                fields.pop("metadata")
            return moved
        if state == TaskState.WORKING and task.state != TaskState.WORKING:
            return task.start_work(f"agent reports {state} {via_text}", **fields)
    elif state in INTERRUPTED_STATES:
        asked = question_of(message, artifacts)
        # Asked anew while the task already waits (a second question, a fresh sign-in
        # link): asked again through the same verb, so the person sees the question asked
        # now and their form answers it. Not the same question under a new messageId.
        if task.state != state or asks_anew(task, asked):
            auth = state == TaskState.AUTH_REQUIRED
            return task.require_input(asked, auth=auth, **fields)
    elif state == TaskState.COMPLETED:
        if not artifacts:  # judged on (and keeps) those reported before, on every path
            artifacts = judged_on(task, message, history)
        output = task_output(artifacts, message, history)
        return _complete(task, output, artifacts, fields, via_text)
    elif state == TaskState.FAILED:
        text = _quoted(task, message) or "The agent reported the task as failed."
        return task.fail("agent_failed", f"Agent '{task.agent_id}': {text}", **fields)
    elif state == TaskState.REJECTED:
        text = _quoted(task, message) or "The agent rejected the task."
        return task.reject(f"Agent '{task.agent_id}': {text}", **fields)
    elif state == TaskState.CANCELED:
        return task.cancel(f"the agent canceled the task {via_text}", **fields)
    if pending is not None:  # same state as ours: only news, written with what follows
        pending.update(fields)
    else:
        _update(task, fields)
    return True


def task_timeout(task: Task) -> tuple[float, str]:
    """The task's timeout in seconds and what set it: the agent's ``timeoutMs`` when it
    has one (it set the deadline: ``agent_calls``), else ``A2A_TASK_TIMEOUT``. A timeout's
    message and its ``details`` take it from here (:mod:`a2a.worker`), so they agree."""
    seconds = call_target(task.agent).timeout_seconds
    if seconds and seconds > 0:
        return task_seconds(seconds), "the agent's timeoutMs"
    return settings.A2A_TASK_TIMEOUT, "A2A_TASK_TIMEOUT"


def _after_the_end(fields: dict[str, Any]) -> dict[str, Any]:
    """What of an agent's news is kept on a task that already ended: its ids (and the
    caller's ``also``), never ``artifacts`` or ``status_message``. A finished task's
    artifacts are those its end was judged on (a COMPLETED's were checked against the
    output schema), and its status message belongs to its final status: a late or
    duplicated answer (a FAILED after a COMPLETED) must not replace what GET serves with
    something never validated. Its messages are still recorded in the conversation."""
    return {k: v for k, v in fields.items() if k not in ("artifacts", "status_message")}


def _update(task: Task, fields: dict[str, Any]) -> None:
    """Store non-state fields (remote ids, latest status message) without a transition."""
    if fields:
        task.note(**fields)


def _output_schema(task: Task) -> dict[str, Any]:
    """The task's skill's output schema as it is now: from the registry cache (cleared
    at once by an edit in this process, an edit in another seen within
    ``A2A_REGISTRY_CACHE_SECONDS``), instead of one more query per completed task. Never
    the skill the worker's claim read with the task (:data:`a2a.rows.TASKS_FOR_WORK`): a
    stream or a held send lasts as long as the agent's task, and that copy is as old as
    the claim, so an edit made meanwhile was not seen (docs/dispatch.md, COMPLETED)."""
    skill = lookups.skill(task.skill_id)
    if skill is None:  # never judged on a cache's word
        skill = task.skill
    return skill.output_schema or {}


def _quoted(task: Task, message: Any) -> str:
    """The agent's reason, as the task's error quotes it: an agent that echoes the request
    (its headers, in a failure's message) would show the platform's credential for it
    there, in the API and the admin. Redacted as the transports redact a refusal; only on
    these paths, so ordinary answers cost nothing."""
    text = message_text(message)
    if not text or task.agent is None:
        return text
    return redactor(call_target(task.agent)).text(text)


def _complete(
    task: Task, output: Any, artifacts: list[Any], fields: dict[str, Any], via_text: str
) -> bool:
    fields = {**fields, "artifacts": artifacts}
    bad = find_bad_text(output, "output")
    if bad is not None:
        # JSON in a text part may escape a NUL or a lone surrogate ("\\u0000"), which no
        # boundary saw: PostgreSQL refuses it (DataError, the task left WORKING), SQLite
        # would store it. The value is kept out of the error's details for that reason.
        return task.fail(
            "output_invalid",
            f"Agent '{task.agent_id}' completed, but its output cannot be stored: {bad}",
            {"errors": [{"path": bad.where, "message": f"contains {bad.what}"}]},
            **fields,
        )
    errors = schema_errors(_output_schema(task), output)
    if errors:
        first = errors[0]
        return task.fail(
            "output_invalid",
            f"Agent '{task.agent_id}' completed, but its output does not match the "
            f"output_schema of skill '{task.skill_id}': {first['path']}: {first['message']}",
            {"errors": errors, "output": output},
            **fields,
        )
    fields.pop("artifacts")
    return task.transition(
        TaskState.COMPLETED,
        f"agent completed {via_text}; output valid",
        output=output,
        artifacts=artifacts,
        question=None,
        error=None,
        **fields,
    )
