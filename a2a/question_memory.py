"""What a task remembers of its questions, so that an agent's later answers are read right.

* Which questions a person answered (:func:`answered`, the last few by
  :func:`message_key`): the same question reported again before the agent took the
  answer in is stale news, not a new question (:func:`asked_again`).
* Which artifacts the task held when its last wait for a person ended: a COMPLETED that
  carries no artifacts is judged on those reported since (:func:`reported_artifacts`,
  :func:`judged_on`), not on a question's.

Used by :mod:`a2a.agent_updates` (the mapping of an agent's status) and
:mod:`a2a.task_actions` (a person's reply).
"""

from __future__ import annotations

import hashlib
import json
from datetime import datetime
from typing import Any

from a2a.models import Task
from a2a.wire import question_of, task_output


def message_key(message: dict[str, Any]) -> str:
    """What a message is kept under in its task's conversation: its messageId, or a digest
    of its content when it has none."""
    message_id = message.get("messageId")
    if not isinstance(message_id, str) or not message_id:
        digest = hashlib.sha256(json.dumps(message, sort_keys=True).encode()).hexdigest()
        message_id = f"sha256:{digest[:40]}"
    return message_id[:200]


# metadata: the keys (message_key) of the questions a person answered, the last few,
# written with the reply's transition (:func:`answered`); digests of the artifacts the
# task held when its last wait for a person ended (a reply, or the agent going on from
# AUTH_REQUIRED by itself): its questions' (:func:`reported_artifacts`).
ANSWERED = "answeredQuestions"
ANSWERED_KEPT = 10
ASKED_WITH = "questionArtifacts"


def answered(task: Task) -> dict[str, Any]:
    """The task's metadata with its question marked answered (a person's reply), and the
    artifacts it holds marked as the question's (:func:`reported_artifacts`)."""
    metadata = wait_ended(task, dict(task.metadata or {}))
    question_id = message_key(task.question) if isinstance(task.question, dict) else None
    ids = [i for i in metadata.get(ANSWERED) or [] if i != question_id]
    metadata[ANSWERED] = ([*ids, question_id] if question_id else ids)[-ANSWERED_KEPT:]
    return metadata


def _digest(artifact: Any) -> str:
    return hashlib.sha256(json.dumps(artifact, sort_keys=True).encode()).hexdigest()[:24]


def wait_ended(task: Task, metadata: dict[str, Any]) -> dict[str, Any]:
    """``metadata`` with the artifacts the task holds marked as its questions' (100 kept)."""
    return {**metadata, ASKED_WITH: [_digest(a) for a in (task.artifacts or [])[:100]]}


def reported_artifacts(task: Task) -> list[Any]:
    """The stored artifacts a COMPLETED without any is judged on: those reported since
    the task's last wait for a person ended (with a WORKING, pushed or streamed: a2a-sdk's
    ``TaskUpdater`` adds its artifact, then completes). Not a question's: LangGraph's
    server asks with an ``Interrupt`` artifact, and completes after the reply with none,
    its result in the status message or history; judged on the question, it failed."""
    asked = set((task.metadata or {}).get(ASKED_WITH) or [])
    return [a for a in task.artifacts or [] if _digest(a) not in asked]


def judged_on(task: Task, message: Any, history: Any) -> list[Any]:
    """What a COMPLETED without artifacts is judged on (and keeps): those reported since
    the last question; all stored, a question's too, when neither these nor the message
    or history hold an output (a result made, a confirmation asked, then completed)."""
    fresh = reported_artifacts(task)
    if len(fresh) == len(task.artifacts or []) or task_output(fresh, message, history) is not None:
        return fresh
    return list(task.artifacts)


def asked_again(
    task: Task,
    status: dict[str, Any],
    history: Any = None,
    artifacts: Any = None,
    *,
    replying: bool = False,
) -> bool:
    """Whether an interrupted status reports a question a person already answered, before
    the agent took the answer in (a 0.3 agent answers a non-blocking reply with the task as
    it was; a listing's overlap shows the question again): that question's message (with
    ``artifacts``, the answer's, as :func:`~a2a.wire.question_of` makes the question of
    them), or, with no message, the question its ``artifacts`` ask, a status older than
    the reply, or (``history``: the answer to the reply itself) a history whose last agent
    message is that question. a2a-sdk 0.3's HTTP+JSON answer to a reply carries no status
    message nor timestamp: taken for a new question, the task waited for a second reply
    while the agent completed it; so did LangGraph's server, which asks in an
    ``Interrupt`` artifact alone. Not a message the agent merely sent before (ADK reports
    its question's message with a WORKING status first, then asks with the same message:
    that is the question, not a repeat).

    A question asked in artifacts alone has no id, only its content: the same content asked
    again (an agent looping until it gets a valid answer) looks like the echo. So the
    artifacts count as a repeat only in the answer to the reply itself (``replying``): a
    later read that still asks is a new question, or the task would poll until its
    deadline while the agent waited for a person."""
    ids = (task.metadata or {}).get(ANSWERED)
    if ids is None:  # never answered: nothing to repeat
        return False
    message = status.get("message")
    if isinstance(message, dict):
        # An empty message asks with the artifacts: the question kept is made of both.
        return message_key(question_of(message, artifacts)) in ids
    if isinstance(history, list):
        said = [m for m in history if isinstance(m, dict) and m.get("role") == "ROLE_AGENT"]
        if said and message_key(said[-1]) in ids:
            return True
    asked = question_of(None, artifacts) if replying else None
    if isinstance(asked, dict) and message_key(asked) in ids:
        return True
    return _before(status, task.state_changed_at)


def _before(status: dict[str, Any], moment: Any) -> bool:
    """Whether the status's own timestamp is older than ``moment`` (False without one)."""
    raw = status.get("timestamp")
    if not isinstance(raw, str) or moment is None:
        return False
    try:
        stamp = datetime.fromisoformat(raw.replace("Z", "+00:00"))
    except ValueError:
        return False
    return stamp.tzinfo is not None and stamp <= moment
