"""What a task remembers of its questions, so that an agent's later answers are read right.

* Which questions a person answered (:func:`answered`, the last few by
  :func:`message_key`): the same question reported again before the agent took the
  answer in is stale news, not a new question (:func:`asked_again`).
* Which question the last reply answered (:func:`answered`, :func:`question_answered`):
  an answer the agent refuses goes back to the person with that question.
* Whether the agent, asking while the task already waits, asks something new
  (:func:`asks_anew`): the person must see and answer the question asked now.
* Which artifacts the task held when its last wait for a person ended: a COMPLETED that
  carries no artifacts is judged on those reported since (:func:`reported_artifacts`,
  :func:`judged_on`), not on a question's.

Used by :mod:`a2a.agent_updates` (the mapping of an agent's status) and
:mod:`a2a.services` (a person's reply).
"""

from __future__ import annotations

import hashlib
import json
from datetime import datetime
from typing import Any

from a2a.models import Direction, Task, TaskMessage
from a2a.states import INTERRUPTED_STATES
from a2a.wire import question_of, says_something, task_output


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
# metadata: the question the last reply answered (None: it answered none), written with
# the reply's transition: {"key": its message_key}; with "inArtifacts": its message
# without parts, for a question asked in the task's artifacts (made again of them); with
# "question": the question itself, only when the task's conversation does not keep it
# (past TASK_AGENT_MESSAGES_MAX). Not a copy every time: a question may be megabytes (a
# file to approve, artifacts reported before), and metadata is rewritten and served with
# the task far more often than a refused answer reads it.
REPLIED_TO = "repliedToQuestion"


def answered(task: Task) -> dict[str, Any]:
    """The task's metadata with its question marked answered (a person's reply), kept as
    the one the reply answers (:func:`question_answered`), and the artifacts it holds
    marked as the question's (:func:`reported_artifacts`)."""
    metadata = wait_ended(task, dict(task.metadata or {}))
    question = task.question if isinstance(task.question, dict) else None
    question_id = message_key(question) if question is not None else None
    ids = [i for i in metadata.get(ANSWERED) or [] if i != question_id]
    metadata[ANSWERED] = ([*ids, question_id] if question_id else ids)[-ANSWERED_KEPT:]
    metadata[REPLIED_TO] = None
    if question is not None and question_id is not None:
        replied: dict[str, Any] = {"key": question_id}
        if _asked_in_artifacts(task, question):
            replied["inArtifacts"] = {k: v for k, v in question.items() if k != "parts"}
        elif _kept_as_asked(task, question_id) != question:
            replied["question"] = question
        metadata[REPLIED_TO] = replied
    return metadata


def _asked_in_artifacts(task: Task, question: dict[str, Any]) -> bool:
    """Whether ``question`` is made of the task's artifacts (:func:`~a2a.wire.question_of`:
    its message said nothing), so that they make it again."""
    message = {k: v for k, v in question.items() if k != "parts"}
    return question_of(message, list(task.artifacts or [])) == question


def _kept_as_asked(task: Task, key: str) -> Any:
    """The agent's message the task's conversation keeps under ``key`` (None: not kept)."""
    rows = TaskMessage.objects.filter(task=task, direction=Direction.FROM_AGENT, message_id=key)
    return rows.values_list("message", flat=True).first()


def question_answered(task: Task) -> tuple[bool, dict[str, Any] | None]:
    """The question the task's last reply answered, for an answer the agent refused:
    (True, it) (None: the reply answered none); (False, None) for a reply made before
    the platform kept it (the caller falls back to the agent's latest message). Not the
    latest message alone: past ``TASK_AGENT_MESSAGES_MAX`` the question asked last is not
    kept, and the latest kept is an older question, answered already."""
    metadata = task.metadata or {}
    if REPLIED_TO not in metadata:
        return False, None
    replied = metadata[REPLIED_TO]
    if not isinstance(replied, dict) or not isinstance(replied.get("key"), str):
        return True, None
    if isinstance(replied.get("question"), dict):
        return True, replied["question"]
    if isinstance(replied.get("inArtifacts"), dict):
        asked = question_of(replied["inArtifacts"], list(task.artifacts or []))
        return True, asked if isinstance(asked, dict) and asked.get("parts") else None
    kept = _kept_as_asked(task, replied["key"])
    return True, kept if isinstance(kept, dict) else None


def asks_anew(task: Task, asked: Any) -> bool:
    """Whether ``asked`` (:func:`~a2a.wire.question_of` the agent's status), reported in
    the interrupted state the task already waits in, is a new question: the task asks it
    again (:meth:`Task.require_input`), so the person reads and answers it, not the one
    before (a sign-in link that expired, a second question after the first).

    Only a question whose content (its parts; a question asked in artifacts is made of
    theirs) differs from the one stored. Not one whose messageId alone is new: an agent
    may build its status message afresh at every read, with a new random id; taken for a
    new question, each poll asked again and moved the question on under the person, whose
    reply was then refused ("the agent asked something else"). Nor a question a person
    already answered, reported again (:func:`asked_again`: stale news)."""
    if task.state not in INTERRUPTED_STATES or not isinstance(asked, dict):
        return False
    stored = task.question if isinstance(task.question, dict) else {}
    if not says_something(asked) or asked.get("parts") == stored.get("parts"):
        # Nothing said (a status message left blank, as LangGraph's server asks, its
        # question in artifacts this report does not carry), or nothing new.
        return False
    return message_key(asked) not in ((task.metadata or {}).get(ANSWERED) or [])


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
