"""The parts of an agent's answer are checked against A2A 1.0 ``Part`` before anything of
the answer is kept (:mod:`a2a.answer_parts`).

Why: what an agent answers is served again by the platform's A2A face, and every a2a-sdk
1.x client parses a whole Task (and a whole ``ListTasks`` page) at once. One part that is
not a Part (a 0.3 agent's ``file.bytes`` that is not base64, copied to ``raw``; a part
with both ``text`` and ``data``) made GetTask fail ("Incorrect padding") and every task
list of the caller holding it unreadable. Such an answer is now a bad answer
(``not_a2a``), refused as any answer that is not A2A is on its path: a poll's or a
stream's fails the task, a push is answered ``400``, a gateway frame gets an ``error``
frame; nothing of it is stored.
"""

from __future__ import annotations

from typing import Any

import pytest
from a2a.types import a2a_pb2 as pb
from google.protobuf.json_format import ParseDict

from a2a import agent_updates
from a2a.answer_parts import canonical_base64, part_problem
from a2a.exceptions import A2AProtocolError
from a2a.face.serializers import task_json
from a2a.models import Direction, Task, TaskMessage
from a2a.states import TaskState
from tests.a2a.helpers import fresh, push

NOT_BASE64 = {"raw": "hello world", "filename": "h.txt"}  # a 0.3 agent's bytes, as text
TWO_MEMBERS = {"text": "a", "data": {"b": 1}}
GOOD = {"data": {"verdict": "pass"}}


# --- the rule --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "part",
    [
        {"text": "hello"},
        {"text": ""},
        {"raw": "aGVsbG8gd29ybGQ=", "filename": "h.txt", "mediaType": "text/plain"},
        {"raw": ""},  # an empty file
        {"raw": "aGVsbG8"},  # unpadded: ProtoJSON reads it (and the face serves it padded)
        {"raw": "aGV-bG8_"},  # the URL-safe alphabet, likewise
        {"raw": "aGVsbA="},  # padding cut short
        {"url": "https://example.com/f.pdf"},
        {"data": {"verdict": "pass"}, "metadata": {"k": 1}},
        {"data": None},  # null is a JSON value
        {"data": [1, 2]},
        {"text": "a", "url": None, "metadata": None},  # null: unset, as in protobuf JSON
        {"kind": "text", "text": "a"},  # a 0.3 leftover the face drops
        {"kind": "file", "file": {"bytes": "aGk=", "mimeType": "text/plain", "name": "h"}},
        {"kind": "file", "file": {"uri": "https://example.com/f"}},
        {"kind": "file", "file": {"bytes": "aGk", "name": "h"}},  # unpadded
    ],
)
def test_each_kind_of_a2a_part_passes(part: dict[str, Any]) -> None:
    """Every shape of an A2A 1.0 Part (and a 0.3 part the face serves as one) is kept."""
    assert part_problem(part) is None


@pytest.mark.parametrize(
    ("part", "problem"),
    [
        (NOT_BASE64, "raw is not base64"),
        ({"raw": "aGVsbG8g\nd29ybGQ="}, "raw is not base64"),  # line breaks
        ({"raw": "aGVsb"}, "raw is not base64"),  # a length no base64 has
        ({"raw": "aGk=aGk="}, "raw is not base64"),  # padding inside
        ({"raw": "aGk*"}, "raw is not base64"),
        ({"raw": "héllo"}, "raw is not base64"),
        ({"raw": 12}, "raw is not a string"),
        (TWO_MEMBERS, "has both text and data"),
        ({"url": "https://x", "raw": "aGk="}, "has both raw and url"),
        ({"text": "a", "data": None}, "has both text and data"),
        ({"text": "a", "file": {"uri": "https://x"}}, "has both text and file.uri"),
        ({}, "has none of text, raw, url, data"),
        ({"filename": "f.txt"}, "has none of text, raw, url, data"),
        ({"text": 5}, "text is not a string"),
        ({"url": ["https://x"]}, "url is not a string"),
        ({"text": "a", "mediaType": 3}, "mediaType is not a string"),
        ({"text": "a", "filename": {}}, "filename is not a string"),
        ({"text": "a", "metadata": "x"}, "metadata is not an object"),
        ({"kind": "file", "file": {"bytes": "hello world"}}, "file.bytes is not base64"),
        ({"kind": "file", "file": "hello"}, "file is not an object"),
        ({"kind": "file", "file": {"uri": "https://x", "mimeType": 1}}, "file.mimeType is not"),
        ("hello", "is not an object"),
    ],
)
def test_a_part_that_is_not_an_a2a_part_is_told_why(part: Any, problem: str) -> None:
    """Exactly one of text/raw/url/data; raw base64 as ProtoJSON reads bytes (what a 1.0
    client decodes: either alphabet, padded or not; nothing else); the types the Part
    gives."""
    found = part_problem(part)
    assert found is not None
    assert found.startswith(problem), found


@pytest.mark.parametrize(
    ("raw", "kept"),
    [
        ("aGVsbG8=", "aGVsbG8="),
        ("aGVsbG8", "aGVsbG8="),
        ("aGV-bG8_", "aGV+bG8/"),
        ("aGV-bG8", "aGV+bG8="),
        ("", ""),
        ("hello world", None),
    ],
)
def test_bytes_are_kept_in_standard_padded_base64(raw: str, kept: str | None) -> None:
    """ProtoJSON reads either alphabet, padded or not; the face serves ``raw`` as kept, and
    the specification's schema for it (``^[A-Za-z0-9+/]*={0,2}$``) has no URL-safe
    alphabet: what is kept is standard and padded. Text that is not base64 has no form."""
    assert canonical_base64(raw) == kept


# --- the one mapping: every path's answer ------------------------------------------------------


def snapshot(task: Task) -> dict[str, Any]:
    task.refresh_from_db()
    names = ("state", "remote_task_id", "status_message", "output", "artifacts", "error")
    return {name: getattr(task, name) for name in names}


def agent_messages(task: Task) -> int:
    return TaskMessage.objects.filter(task=task, direction=Direction.FROM_AGENT).count()


@pytest.mark.django_db
@pytest.mark.parametrize("via", ["a2a", "stream", "websocket"])
@pytest.mark.parametrize(
    ("bad", "problem"),
    [(NOT_BASE64, "raw is not base64"), (TWO_MEMBERS, "has both text and data")],
)
def test_an_answer_with_a_bad_artifact_part_is_refused_whole(
    task: Task, via: str, bad: dict[str, Any], problem: str
) -> None:
    """A COMPLETED whose artifacts hold one bad part keeps nothing (not its artifacts, not
    its agent task id) and raises ``not_a2a`` naming the part, which each path handles as
    it handles any answer that is not A2A."""
    before = snapshot(task)
    with pytest.raises(A2AProtocolError) as raised:
        agent_updates.apply_agent_update(
            task,
            status={"state": "TASK_STATE_COMPLETED"},
            artifacts=[{"artifactId": "a", "parts": [GOOD, bad]}],
            remote={"id": "r-1", "contextId": "c-1"},
            via=via,
        )
    assert raised.value.code == "not_a2a"
    assert f"artifact 0 part 1: {problem}" in raised.value.message
    assert raised.value.details["part"] == "artifact 0 part 1"
    assert raised.value.details["problem"].startswith(problem)
    assert snapshot(task) == before


@pytest.mark.django_db
def test_a_question_with_a_bad_part_is_neither_asked_nor_recorded(task: Task) -> None:
    """The status message is served too (the question, the conversation): one with a bad
    part is refused before it joins the conversation."""
    before = snapshot(task)
    question = {"messageId": "q1", "role": "ROLE_AGENT", "parts": [{"text": "EU?"}, NOT_BASE64]}
    with pytest.raises(A2AProtocolError, match="status message part 1: raw is not base64"):
        agent_updates.apply_agent_update(
            task,
            status={"state": "TASK_STATE_INPUT_REQUIRED", "message": question},
            remote={"id": "r-1", "contextId": "c-1"},
            via="a2a",
        )
    assert snapshot(task) == before
    assert agent_messages(task) == 0


@pytest.mark.django_db
def test_a_bare_message_answer_with_a_bad_part_is_refused_before_it_is_recorded(
    task: Task,
) -> None:
    """A bare Message is the agent's whole answer (its parts become the artifact): one
    with a bad part is refused, named as the message's part, and never recorded."""
    before = snapshot(task)
    message = {"messageId": "m1", "role": "ROLE_AGENT", "parts": [TWO_MEMBERS]}
    with pytest.raises(A2AProtocolError, match="message part 0: has both text and data"):
        agent_updates.apply_agent_reply(task, task_json=None, message=message, via="a2a")
    assert snapshot(task) == before
    assert agent_messages(task) == 0


URL_SAFE = {"raw": "aGV-bG8_", "filename": "h.bin"}  # unpadded, URL-safe: valid A2A 1.0
STANDARD = {"raw": "aGV+bG8/", "filename": "h.bin"}  # as the platform keeps and serves it


def assert_served_as_a2a(task: Task) -> None:
    """What the face serves of ``task`` fits the specification's schema and parses as a
    1.0 Task (what a2a-sdk's client does)."""
    from tests.a2a_face.schema import validate

    served = task_json(task)
    validate("Task", served)
    ParseDict(served, pb.Task(), ignore_unknown_fields=True)


@pytest.mark.django_db
@pytest.mark.parametrize("via", ["a2a", "stream", "websocket"])
def test_an_answer_with_url_safe_unpadded_bytes_is_taken_and_kept_standard(
    task: Task, via: str
) -> None:
    """Bytes in the URL-safe alphabet without padding are valid A2A 1.0 JSON (a2a-sdk 1.x
    parses them): the answer completes the task (not refused ``not_a2a``), and its
    artifacts and status message are kept in standard padded base64, which the face's
    schema takes."""
    said = {"messageId": "m-done", "role": "ROLE_AGENT", "parts": [{"text": "done"}, URL_SAFE]}
    agent_updates.apply_agent_update(
        task,
        status={"state": "TASK_STATE_COMPLETED", "message": said},
        artifacts=[{"artifactId": "a", "parts": [GOOD, URL_SAFE]}],
        remote={"id": "r-1", "contextId": "c-1"},
        via=via,
    )
    task.refresh_from_db()
    assert (task.state, task.output, task.error) == (TaskState.COMPLETED, {"verdict": "pass"}, None)
    assert task.artifacts == [{"artifactId": "a", "parts": [GOOD, STANDARD]}]
    assert task.status_message["parts"][1] == STANDARD
    kept = TaskMessage.objects.get(task=task, direction=Direction.FROM_AGENT)
    assert kept.message["parts"][1] == STANDARD
    assert_served_as_a2a(task)


@pytest.mark.django_db
def test_a_bare_message_answer_keeps_its_bytes_standard(task: Task) -> None:
    """A bare Message answer is recorded and becomes the artifact: both with its bytes
    in standard padded base64."""
    message = {"messageId": "m1", "role": "ROLE_AGENT", "parts": [GOOD, URL_SAFE]}
    agent_updates.apply_agent_reply(task, task_json=None, message=message, via="a2a")
    task.refresh_from_db()
    assert (task.state, task.output) == (TaskState.COMPLETED, {"verdict": "pass"})
    assert task.artifacts[0]["parts"] == [GOOD, STANDARD]
    kept = TaskMessage.objects.get(task=task, direction=Direction.FROM_AGENT)
    assert kept.message["parts"] == [GOOD, STANDARD]


def test_pushed_url_safe_bytes_are_taken_and_kept_standard(pushed_task: Task) -> None:
    """Every push that keeps parts (an ``artifactUpdate``, a message, a Task) takes bytes
    ProtoJSON reads and keeps them in standard padded base64."""
    artifact = {"artifactId": "a1", "parts": [URL_SAFE]}
    update = {"artifactUpdate": {"taskId": "agent-task-1", "contextId": "c", "artifact": artifact}}
    assert push(pushed_task, update).status_code == 200
    assert fresh(pushed_task).artifacts == [{"artifactId": "a1", "parts": [STANDARD]}]
    message = {"messageId": "m1", "role": "ROLE_AGENT", "taskId": "agent-task-1"}
    assert push(pushed_task, {"message": {**message, "parts": [URL_SAFE]}}).status_code == 200
    kept = TaskMessage.objects.get(task=pushed_task, direction=Direction.FROM_AGENT)
    assert kept.message["parts"] == [STANDARD]
    status = {"state": "TASK_STATE_COMPLETED", "timestamp": "2026-12-01T10:00:03Z"}
    artifacts = [{"artifactId": "a2", "parts": [GOOD, URL_SAFE]}]
    body = {"task": {"id": "agent-task-1", "status": status, "artifacts": artifacts}}
    response = push(pushed_task, body)
    assert response.status_code == 200, response.text
    task = fresh(pushed_task)
    assert (task.state, task.output) == (TaskState.COMPLETED, {"verdict": "pass"})
    assert task.artifacts == [{"artifactId": "a2", "parts": [GOOD, STANDARD]}]
    assert_served_as_a2a(task)
