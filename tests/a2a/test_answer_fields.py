"""An agent's Artifacts and Messages are checked against A2A 1.0 whole, not only their
parts (:mod:`a2a.answer_parts`).

Why: an artifact whose ``artifactId`` was 5 (or an object), whose ``name`` was a list,
``metadata`` a string or ``extensions`` a number, or a status message whose
``messageId`` was 7 or ``metadata`` a list, completed its task and was stored as sent;
the face served it, and every a2a-sdk client failed to parse that GetTask and the whole
``ListTasks`` page holding it (a ParseError). Such an answer is now refused as a bad
part is, on every path: a send's, a poll's or a stream's fails the task ``not_a2a``
naming the field, a push is ``400 not_a2a`` and changes nothing.
"""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest
from a2a.types import a2a_pb2 as pb
from google.protobuf.json_format import ParseDict, ParseError
from starlette.responses import Response

from a2a.answer_parts import artifact_problem, message_problem
from a2a.face.asgi import FaceASGIHandler
from a2a.face.db import close_pool
from a2a.face.serializers import task_json
from a2a.models import Task
from a2a.states import TaskState
from tests.a2a.helpers import fresh, push, status_update
from tests.a2a.test_answer_parts import agent_messages, snapshot
from tests.support.scripted_agent import (
    COMPLETED,
    SUBMITTED,
    WORKING,
    ScriptedAgent,
    events,
    refused,
    register,
    run_out,
    run_scripted_agent,
    start,
    task_answer,
)

PARTS = [{"data": {"verdict": "pass"}}]
GOOD_ARTIFACT = {"artifactId": "a", "parts": PARTS}
SAID = [{"text": "done"}]

# --- the rule --------------------------------------------------------------------------------

GOOD_ARTIFACTS = [
    {"artifactId": "a", "parts": PARTS},
    {"parts": PARTS},  # no field of an Artifact is required by the JSON schema
    {"artifactId": "a", "name": "n", "description": "d", "metadata": {"k": 1}, "parts": PARTS},
    {"artifactId": "a", "extensions": ["https://example.com/ext"], "parts": PARTS},
    {"artifactId": "a", "extensions": [], "parts": PARTS},
    {"artifactId": None, "name": None, "metadata": None, "extensions": None, "parts": PARTS},
    {"artifactId": "a", "kind": "artifact", "parts": PARTS},  # fields it does not name: the face's
]

BAD_ARTIFACTS = {
    "artifactId_int": ({"artifactId": 5, "parts": PARTS}, "artifactId is not a string"),
    "artifactId_obj": ({"artifactId": {"x": 1}, "parts": PARTS}, "artifactId is not a string"),
    "name_list": ({"artifactId": "b", "name": ["x"], "parts": PARTS}, "name is not a string"),
    "description_int": (
        {"artifactId": "b", "description": 3, "parts": PARTS},
        "description is not a string",
    ),
    "metadata_str": (
        {"artifactId": "b", "metadata": "x", "parts": PARTS},
        "metadata is not an object",
    ),
    "extensions_int": (
        {"artifactId": "b", "extensions": 5, "parts": PARTS},
        "extensions is not a list of strings",
    ),
    "extensions_of_ints": (
        {"artifactId": "b", "extensions": [1], "parts": PARTS},
        "extensions is not a list of strings",
    ),
}

GOOD_MESSAGES = [
    {"messageId": "m", "role": "ROLE_AGENT", "parts": SAID},
    {"parts": SAID},
    {"messageId": "m", "role": "agent", "parts": SAID},  # 0.3's, which the face maps
    {"messageId": "m", "role": "ROLE_UNSPECIFIED", "parts": SAID},
    {"messageId": "m", "role": 2, "parts": SAID},  # ProtoJSON reads an enum's number
    {"messageId": "m", "role": "", "taskId": "t", "contextId": "c", "parts": SAID},
    {
        "messageId": "m",
        "metadata": {},
        "extensions": ["e"],
        "referenceTaskIds": ["t0"],
        "parts": SAID,
    },
    {"messageId": None, "taskId": None, "metadata": None, "referenceTaskIds": None, "parts": SAID},
]

BAD_MESSAGES = {
    "messageId_int": (
        {"messageId": 7, "role": "ROLE_AGENT", "parts": SAID},
        "messageId is not a string",
    ),
    "metadata_list": (
        {"messageId": "m", "role": "ROLE_AGENT", "metadata": [1], "parts": SAID},
        "metadata is not an object",
    ),
    "role_unknown": (
        {"messageId": "m", "role": "ROLE_KING", "parts": SAID},
        "role is not an A2A Role",
    ),
    "role_bool": ({"messageId": "m", "role": True, "parts": SAID}, "role is not an A2A Role"),
    "taskId_int": ({"messageId": "m", "taskId": 3, "parts": SAID}, "taskId is not a string"),
    "contextId_obj": (
        {"messageId": "m", "contextId": {}, "parts": SAID},
        "contextId is not a string",
    ),
    "references_str": (
        {"messageId": "m", "referenceTaskIds": "t0", "parts": SAID},
        "referenceTaskIds is not a list of strings",
    ),
    "extensions_obj": (
        {"messageId": "m", "extensions": {"e": 1}, "parts": SAID},
        "extensions is not a list of strings",
    ),
}


def parses_as(value: Any, message: Any) -> bool:
    """Whether a2a-sdk's client would parse ``value`` (as ``ParseDict`` does)."""
    try:
        ParseDict(value, message, ignore_unknown_fields=True)
    except Exception:  # any parse failure is the answer
        return False
    return True


@pytest.mark.parametrize("artifact", GOOD_ARTIFACTS)
def test_an_a2a_artifact_passes(artifact: dict[str, Any]) -> None:
    assert artifact_problem(artifact) is None
    assert parses_as({k: v for k, v in artifact.items() if k != "kind"}, pb.Artifact())


@pytest.mark.parametrize("message", GOOD_MESSAGES)
def test_an_a2a_message_passes(message: dict[str, Any]) -> None:
    """As the face serves it: a 0.3 role mapped, an unset one the agent's."""
    assert message_problem(message) is None
    role = message.get("role")
    served = {**message, "role": "ROLE_AGENT" if role in ("agent", "") else role}
    assert parses_as(served, pb.Message())


@pytest.mark.parametrize("case", list(BAD_ARTIFACTS))
def test_an_artifact_a2a_sdk_cannot_parse_is_named(case: str) -> None:
    artifact, problem = BAD_ARTIFACTS[case]
    assert not parses_as(artifact, pb.Artifact())  # the reason it is refused
    bad = artifact_problem(artifact, "artifact 0")
    assert bad is not None
    assert str(bad) == f"artifact 0: {problem}"


MESSAGE_FIELDS = [case for case in BAD_MESSAGES if not case.startswith("role")]


@pytest.mark.parametrize("case", MESSAGE_FIELDS)
def test_a_message_a2a_sdk_cannot_parse_is_named(case: str) -> None:
    message, problem = BAD_MESSAGES[case]
    assert not parses_as(message, pb.Message())
    bad = message_problem(message, "status message")
    assert bad is not None
    assert str(bad) == f"status message: {problem}"


@pytest.mark.parametrize("case", ["role_unknown", "role_bool"])
def test_a_role_that_is_none_of_roles_is_named(case: str) -> None:
    """Role is one of its names or numbers (the JSON schema's ``anyOf``). a2a-sdk's lenient
    parse drops a name it does not know (and takes ``true`` for 1), a strict parse (other
    SDKs') refuses the whole Task: not A2A either way."""
    message, problem = BAD_MESSAGES[case]
    if case == "role_unknown":
        with pytest.raises(ParseError):
            ParseDict(message, pb.Message())
    bad = message_problem(message, "status message")
    assert bad is not None
    assert str(bad) == f"status message: {problem}"


# --- through the worker: a send's answer, a poll's, a stream's --------------------------------


def answer_with(case: str) -> Response:
    """The agent's COMPLETED Task holding the bad artifact or status message of ``case``."""
    if case in BAD_ARTIFACTS:
        return task_answer(COMPLETED, artifacts=[GOOD_ARTIFACT, BAD_ARTIFACTS[case][0]])
    return task_answer(COMPLETED, BAD_MESSAGES[case][0], artifacts=[GOOD_ARTIFACT])


def named(case: str) -> str:
    """How the task's error names the bad field of ``case``."""
    if case in BAD_ARTIFACTS:
        return f"artifact 1: {BAD_ARTIFACTS[case][1]}"
    return f"status message: {BAD_MESSAGES[case][1]}"


@pytest.fixture
def scripted_agent(settings: Any) -> Any:
    settings.ALLOW_LOOPBACK_URLS = True
    settings.A2A_LIST_INTERVAL = 0  # polled one by one, not by listings
    with run_scripted_agent() as agent:
        yield agent


def assert_refused(task: Task, case: str) -> None:
    """The task failed as after any answer that is not A2A, naming the field; nothing of
    the answer kept; what the face serves of it parses as a 1.0 Task."""
    assert (task.state, task.error["code"]) == (TaskState.FAILED, "not_a2a"), task.error
    assert named(case) in task.error["message"]
    assert task.artifacts == []
    assert parses_as(task_json(task), pb.Task())


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("case", [*BAD_ARTIFACTS, *BAD_MESSAGES])
def test_a_send_answer_with_a_bad_artifact_or_message_fails_the_task(
    scripted_agent: ScriptedAgent, make_agent: Any, make_skill: Any, make_user: Any, case: str
) -> None:
    register(make_agent, make_skill, scripted_agent)
    scripted_agent.answer = lambda kind, body: answer_with(case) if kind == "send" else refused()
    assert_refused(run_out(start(make_user())), case)


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(
    "case", ["artifactId_int", "extensions_int", "messageId_int", "metadata_list"]
)
def test_a_poll_answer_with_a_bad_artifact_or_message_fails_the_task(
    scripted_agent: ScriptedAgent, make_agent: Any, make_skill: Any, make_user: Any, case: str
) -> None:
    register(make_agent, make_skill, scripted_agent)
    answers = {"send": lambda: task_answer(SUBMITTED), "get": lambda: answer_with(case)}
    scripted_agent.answer = lambda kind, body: answers.get(kind, refused)()
    assert_refused(run_out(start(make_user())), case)


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("case", ["artifactId_int", "artifactId_obj", "name_list", "role_unknown"])
def test_a_stream_with_a_bad_artifact_or_message_fails_the_task(
    scripted_agent: ScriptedAgent, make_agent: Any, make_skill: Any, make_user: Any, case: str
) -> None:
    """Over ``artifactUpdate`` and ``statusUpdate`` events, folded into the Task that is
    checked (an object for ``artifactId``, a key the stream's view cannot index by, too)."""
    register(make_agent, make_skill, scripted_agent, stream=True)
    first = {"task": {"id": "t1", "contextId": "c", "status": {"state": WORKING}}}
    status: dict[str, Any] = {"state": COMPLETED}
    if case in BAD_ARTIFACTS:
        artifact = BAD_ARTIFACTS[case][0]
        sent = [
            first,
            {"artifactUpdate": {"taskId": "t1", "contextId": "c", "artifact": GOOD_ARTIFACT}},
        ]
        sent.append({"artifactUpdate": {"taskId": "t1", "contextId": "c", "artifact": artifact}})
    else:
        status["message"] = BAD_MESSAGES[case][0]
        sent = [
            first,
            {"artifactUpdate": {"taskId": "t1", "contextId": "c", "artifact": GOOD_ARTIFACT}},
        ]
    sent.append({"statusUpdate": {"taskId": "t1", "contextId": "c", "status": status}})
    scripted_agent.answer = lambda kind, body: events(*sent) if kind == "stream" else refused()
    assert_refused(run_out(start(make_user())), case)


# --- the face: what its a2a-sdk clients read after such an answer ------------------------------


@pytest.mark.django_db(transaction=True)
def test_the_callers_task_list_stays_readable_after_a_bad_artifact_id(
    scripted_agent: ScriptedAgent, make_agent: Any, make_skill: Any, make_user: Any
) -> None:
    """One agent answer with ``artifactId: 5`` made the caller's whole ``ListTasks`` page
    (and its GetTask) unparseable by a2a-sdk: refused, both parse, the good task's artifact
    served as it was."""
    register(make_agent, make_skill, scripted_agent)
    user = make_user()
    scripted_agent.answer = lambda kind, body: task_answer(COMPLETED, artifacts=[GOOD_ARTIFACT])
    good = run_out(start(user))
    bad = {**GOOD_ARTIFACT, "artifactId": 5}
    scripted_agent.answer = lambda kind, body: task_answer(COMPLETED, artifacts=[bad])
    refused = run_out(start(user))
    assert (good.state, refused.state) == (TaskState.COMPLETED, TaskState.FAILED)

    async def get(path: str) -> httpx.Response:
        transport = httpx.ASGITransport(app=FaceASGIHandler())
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
            headers = {"Authorization": f"Bearer {user.raw_token}", "A2A-Version": "1.0"}
            return await client.get(path, headers=headers)

    try:
        listing = asyncio.run(get("/v1/a2a/tasks?includeArtifacts=true"))
        one = asyncio.run(get(f"/v1/a2a/tasks/{refused.id}"))
    finally:
        close_pool()
    assert (listing.status_code, one.status_code) == (200, 200)
    assert parses_as(listing.json(), pb.ListTasksResponse())
    assert parses_as(one.json(), pb.Task())
    served = {t["id"]: t.get("artifacts") for t in listing.json()["tasks"]}
    assert served[str(good.id)] == [GOOD_ARTIFACT]
    assert (
        "artifact 0: artifactId is not a string"
        in one.json()["status"]["message"]["parts"][0]["text"]
    )


# --- pushes --------------------------------------------------------------------------------------


def pushed_bodies() -> list[tuple[dict[str, Any], str]]:
    task = {"id": "agent-task-1", "contextId": "c", "status": {"state": COMPLETED}}
    artifact, problem = BAD_ARTIFACTS["artifactId_int"]
    message, said = BAD_MESSAGES["messageId_int"]
    update = {"taskId": "agent-task-1", "contextId": "c"}
    return [
        ({"task": {**task, "artifacts": [artifact]}}, f"artifact 0: {problem}"),
        (
            {"task": {**task, "artifacts": [BAD_ARTIFACTS["extensions_int"][0]]}},
            "artifact 0: extensions",
        ),
        (
            {"task": {**task, "status": {"state": COMPLETED, "message": message}}},
            f"status message: {said}",
        ),
        (
            status_update("TASK_STATE_INPUT_REQUIRED", message=BAD_MESSAGES["metadata_list"][0]),
            "status message: metadata",
        ),
        (
            {"artifactUpdate": {**update, "artifact": BAD_ARTIFACTS["name_list"][0]}},
            "artifact: name is not a string",
        ),
        (
            {"message": {**BAD_MESSAGES["role_unknown"][0], "taskId": "agent-task-1"}},
            "message: role is not",
        ),
    ]


@pytest.mark.parametrize(("body", "problem"), pushed_bodies())
def test_a_push_with_a_bad_artifact_or_message_is_a_400_and_changes_nothing(
    pushed_task: Task, body: dict[str, Any], problem: str
) -> None:
    """A pushed Task, ``statusUpdate``, ``artifactUpdate`` or Message holding one is
    refused as a bad part is: ``400 not_a2a`` naming the field; the task keeps what it had."""
    before = snapshot(pushed_task)
    response = push(pushed_task, body)
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert error["code"] == "not_a2a"
    assert problem in error["message"]
    assert snapshot(fresh(pushed_task)) == before
    assert agent_messages(pushed_task) == 0
    assert parses_as(task_json(fresh(pushed_task)), pb.Task())
