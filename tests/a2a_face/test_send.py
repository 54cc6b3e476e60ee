"""SendMessage: skill and agent choice, the relayed message, follow-ups, and their errors."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

import pytest

from a2a.face import ids
from a2a.face.context import CallContext
from a2a.models import Task, TaskMessage
from a2a.push_models import PushNotificationConfig
from a2a.states import TaskState
from tests.a2a_face.conftest import FaceClient, error_reason, talk

pytestmark = pytest.mark.django_db


def message(**overrides: Any) -> dict[str, Any]:
    msg = {
        "messageId": f"m-{uuid.uuid4().hex[:8]}",
        "role": "ROLE_USER",
        "parts": [{"data": {"product": "lamp"}}, {"text": "please"}],
        "metadata": {"trace": "t-1"},
    }
    msg.update(overrides)
    return msg


def send(client: FaceClient, msg: dict[str, Any], path: str = "/v1/a2a", **extra: Any) -> Any:
    body = {"message": msg, "configuration": {"returnImmediately": True}, **extra}
    return client.post(f"{path}/message:send", body)


def test_send_creates_a_task_relaying_the_message_unchanged(
    as_alice: FaceClient, alice: Any, agent: Any
) -> None:
    msg = message(contextId="ctx-mine")
    response = send(as_alice, msg)
    assert response.status_code == 200
    body = response.json()
    assert set(body) == {"task"}
    task = Task.objects.get(pk=body["task"]["id"])
    assert body["task"]["status"]["state"] == "TASK_STATE_SUBMITTED"
    # The caller sees its own ids; the agent gets them in the caller's namespace.
    assert body["task"]["contextId"] == "ctx-mine"
    assert body["task"]["history"][0]["messageId"] == msg["messageId"]
    assert (task.origin, task.created_by, task.agent_id) == ("a2a", alice, agent.id)
    relayed = task.outbound_message
    for key in ("parts", "metadata", "role"):
        assert relayed[key] == msg[key]
    tag = ids.caller_tag(CallContext(principal=alice))
    prefix, _, client_id = relayed["messageId"].partition(":")
    assert (len(prefix), client_id) == (ids.TAG_LENGTH, msg["messageId"])
    assert prefix != tag  # the message's own, not the caller's (see the reuse test)
    assert relayed["contextId"] == f"{tag}:ctx-mine" == task.context_id
    assert task.input == {"product": "lamp"}


def test_send_generates_a_context_id(as_alice: FaceClient, agent: Any) -> None:
    body = send(as_alice, message()).json()
    assert body["task"]["contextId"]


def test_message_ids_may_be_reused(as_alice: FaceClient, agent: Any) -> None:
    """A client reusing a messageId makes two tasks, and the agent sees two messages: a
    deduplicating agent answered the second task with the first one's agent task, so its
    input was never worked on. The caller still sees its own id on both."""
    msg = message()
    first = send(as_alice, msg).json()["task"]
    second = send(as_alice, msg).json()["task"]
    assert first["id"] != second["id"]
    sent = [Task.objects.get(pk=t["id"]).outbound_message["messageId"] for t in (first, second)]
    assert sent[0] != sent[1]
    assert first["history"][0]["messageId"] == second["history"][0]["messageId"] == msg["messageId"]


def test_a_reused_message_id_in_follow_ups_reaches_the_agent_as_two_messages(
    as_alice: FaceClient, alice: Any, make_task: Callable[..., Task]
) -> None:
    """Two answers to one task with the same messageId: each is a message of its own
    toward the agent (one id would be a duplicate it drops) and in the task's history."""
    task = make_task(alice, remote_task_id="remote-1")
    for answer in ("red", "blue"):
        task.refresh_from_db()
        task.require_input({"messageId": f"q-{answer}", "parts": [{"text": "Which colour?"}]})
        reply = message(taskId=str(task.id), messageId="same", parts=[{"text": answer}])
        assert send(as_alice, reply, configuration={"returnImmediately": True}).status_code == 200
    relayed = TaskMessage.objects.filter(task=task, message_id__endswith=":same")
    assert relayed.count() == 2
    assert len({m.message["messageId"] for m in relayed}) == 2


@pytest.mark.parametrize(
    "where",
    ["request", "message"],
)
def test_the_skill_comes_from_metadata(
    as_alice: FaceClient,
    make_skill: Callable[..., Any],
    make_agent: Callable[..., Any],
    where: str,
) -> None:
    one, two = make_skill(id="one"), make_skill(id="two")
    make_agent(skills=[one, two])
    if where == "request":
        response = send(as_alice, message(), metadata={"skillId": "two"})
    else:
        response = send(as_alice, message(metadata={"skillId": "two"}))
    assert Task.objects.get(pk=response.json()["task"]["id"]).skill_id == "two"


def test_without_a_skill_id_the_default_skill_is_used(
    as_alice: FaceClient,
    settings: Any,
    make_skill: Callable[..., Any],
    make_agent: Callable[..., Any],
) -> None:
    one, two = make_skill(id="one"), make_skill(id="two")
    make_agent(skills=[one, two])
    settings.A2A_DEFAULT_SKILL = "one"
    response = send(as_alice, message())
    assert Task.objects.get(pk=response.json()["task"]["id"]).skill_id == "one"


def test_without_a_skill_id_and_several_skills_the_error_lists_them(
    as_alice: FaceClient, make_skill: Callable[..., Any], make_agent: Callable[..., Any]
) -> None:
    make_agent(skills=[make_skill(id="one"), make_skill(id="two")])
    response = send(as_alice, message())
    assert error_reason(response) == "INVALID_PARAMS"
    assert "one" in response.json()["error"]["message"]
    assert response.json()["error"]["details"][0]["metadata"]["skills"] == '["one", "two"]'
    assert Task.objects.count() == 0


def test_an_unknown_skill_is_invalid_params(as_alice: FaceClient, agent: Any) -> None:
    response = send(as_alice, message(metadata={"skillId": "nope"}))
    assert error_reason(response) == "INVALID_PARAMS"


@pytest.mark.parametrize(
    "body",
    [
        {},
        {"message": "hello"},
        {"message": {"role": "ROLE_USER", "parts": [{"text": "x"}]}},
        {"message": {"messageId": "m", "role": "ROLE_USER", "parts": []}},
        {"message": {"messageId": "m", "role": "ROLE_AGENT", "parts": [{"text": "x"}]}},
        {"message": {"messageId": "m", "role": True, "parts": [{"text": "x"}]}},  # == 1
        {"message": {"messageId": "m", "role": "ROLE_USER", "parts": "x"}},
        {
            "message": {"messageId": "m", "role": "ROLE_USER", "parts": [{"text": "x"}]},
            "configuration": {"historyLength": -2},
        },
    ],
)
def test_malformed_sends_are_invalid_params(
    as_alice: FaceClient, agent: Any, body: dict[str, Any]
) -> None:
    response = as_alice.post("/v1/a2a/message:send", body)
    assert response.status_code == 400
    assert error_reason(response) == "INVALID_PARAMS"
    assert Task.objects.count() == 0


def test_a_role_given_as_its_number_is_stored_as_its_name(as_alice: FaceClient, agent: Any) -> None:
    """ProtoJSON takes ``"role": 1`` for ROLE_USER. Kept as sent, it went to the agent as
    1, GetTask served 1 and a 0.3 client read its own message as the agent's."""
    task_id = send(as_alice, message(role=1)).json()["task"]["id"]
    assert Task.objects.get(pk=task_id).outbound_message["role"] == "ROLE_USER"
    assert as_alice.get(f"/v1/a2a/tasks/{task_id}").json()["history"][0]["role"] == "ROLE_USER"
    legacy = as_alice.rpc("tasks/get", {"id": task_id}, **{"A2A-Version": ""}).json()["result"]
    assert legacy["history"][0]["role"] == "user"


def test_an_unknown_task_id_is_task_not_found(as_alice: FaceClient, agent: Any) -> None:
    response = send(as_alice, message(taskId=str(uuid.uuid4())))
    assert response.status_code == 404
    assert error_reason(response) == "TASK_NOT_FOUND"


def test_another_callers_task_id_is_task_not_found(
    as_bob: FaceClient, alice: Any, make_task: Callable[..., Task]
) -> None:
    task = make_task(alice)
    task.require_input({"messageId": "q", "parts": [{"text": "?"}]})
    response = send(as_bob, message(taskId=str(task.id)))
    assert error_reason(response) == "TASK_NOT_FOUND"


def test_a_message_to_a_finished_task_is_unsupported(
    as_alice: FaceClient, alice: Any, make_task: Callable[..., Task]
) -> None:
    task = make_task(alice)
    task.complete({"verdict": "pass"}, [])
    response = send(as_alice, message(taskId=str(task.id)))
    assert response.status_code == 400
    assert error_reason(response) == "UNSUPPORTED_OPERATION"


def test_a_context_id_that_does_not_match_the_task_is_refused(
    as_alice: FaceClient, alice: Any, make_task: Callable[..., Task]
) -> None:
    task = make_task(alice)
    task.require_input({"messageId": "q", "parts": [{"text": "?"}]})
    response = send(as_alice, message(taskId=str(task.id), contextId="someone-elses"))
    assert error_reason(response) == "INVALID_PARAMS"
    task.refresh_from_db()
    assert task.state == TaskState.INPUT_REQUIRED


def test_an_answer_to_the_agents_question_resumes_the_task(
    as_alice: FaceClient, alice: Any, make_task: Callable[..., Task]
) -> None:
    task = make_task(alice, remote_task_id="remote-1", remote_context_id="remote-ctx")
    task.require_input({"messageId": "q", "parts": [{"text": "Which market?"}]})
    answer = message(taskId=str(task.id), contextId=task.context_id)
    response = send(as_alice, answer)
    assert response.status_code == 200
    body = response.json()["task"]
    assert body["id"] == str(task.id)
    assert body["status"]["state"] == "TASK_STATE_WORKING"
    relayed = TaskMessage.objects.filter(task=task, message_id__endswith=answer["messageId"]).get()
    # The agent gets its own ids; the client keeps seeing ours.
    assert relayed.message["taskId"] == "remote-1"
    assert relayed.message["contextId"] == "remote-ctx"
    assert relayed.message["messageId"] != answer["messageId"]
    assert body["history"][-1]["taskId"] == str(task.id)
    assert body["history"][-1]["messageId"] == answer["messageId"]


def test_a_message_to_a_task_that_asked_nothing_is_unsupported(
    as_alice: FaceClient, alice: Any, make_task: Callable[..., Task]
) -> None:
    task = make_task(alice)
    task.start_work()
    response = send(as_alice, message(taskId=str(task.id)))
    assert error_reason(response) == "UNSUPPORTED_OPERATION"


def test_a_blocking_send_returns_the_task_when_its_wait_runs_out(
    as_alice: FaceClient, agent: Any, settings: Any
) -> None:
    settings.A2A_BLOCKING_TIMEOUT = 0.05
    response = as_alice.post("/v1/a2a/message:send", {"message": message()})
    assert response.status_code == 200
    assert response.json()["task"]["status"]["state"] == "TASK_STATE_SUBMITTED"


def test_a_push_config_can_come_with_the_send(
    as_alice: FaceClient, agent: Any, settings: Any
) -> None:
    settings.ALLOW_LOOPBACK_URLS = True
    config = {"url": "http://127.0.0.1:9/hook", "token": "t"}
    response = send(
        as_alice,
        message(),
        configuration={"returnImmediately": True, "taskPushNotificationConfig": config},
    )
    task_id = response.json()["task"]["id"]
    assert PushNotificationConfig.objects.get().task_id == uuid.UUID(task_id)


def test_a_task_the_caller_waits_for_streams_or_configures_is_stored_watched(
    as_alice: FaceClient, agent: Any, settings: Any
) -> None:
    """Watched tasks are the ones whose transitions look for listeners and configs
    (``Task.watched``); the caller's own send says which, in the creation's INSERT."""
    settings.A2A_BLOCKING_TIMEOUT = 0.01
    settings.ALLOW_LOOPBACK_URLS = True

    def watched(response: Any) -> bool:
        assert response.status_code == 200
        return Task.objects.get(pk=response.json()["task"]["id"]).watched

    assert watched(send(as_alice, message())) is False  # returnImmediately
    assert watched(as_alice.post("/v1/a2a/message:send", {"message": message()})) is True
    config = {"url": "http://127.0.0.1:9/hook", "token": "t"}
    with_config = {"returnImmediately": True, "taskPushNotificationConfig": config}
    assert watched(send(as_alice, message(), configuration=with_config)) is True
    streamed = as_alice.client.post(
        "/v1/a2a/message:stream",
        {"message": message()},
        content_type="application/json",
        headers=as_alice.headers,
    )
    assert streamed.status_code == 200
    assert Task.objects.latest("created_at").watched is True


def test_a_bad_push_config_with_the_send_creates_nothing(as_alice: FaceClient, agent: Any) -> None:
    config = {"url": "http://127.0.0.1:9/hook", "token": "a\nb"}
    response = send(
        as_alice,
        message(),
        configuration={"returnImmediately": True, "taskPushNotificationConfig": config},
    )
    assert error_reason(response) == "INVALID_PARAMS"
    assert Task.objects.count() == 0


def test_send_over_jsonrpc(as_alice: FaceClient, agent: Any) -> None:
    result = as_alice.rpc(
        "SendMessage", {"message": message(), "configuration": {"returnImmediately": True}}
    ).json()["result"]
    assert result["task"]["status"]["state"] == "TASK_STATE_SUBMITTED"


def test_anonymous_senders_reach_their_task_by_id(settings: Any, agent: Any, alice: Any) -> None:
    settings.A2A_ALLOW_ANONYMOUS = True
    anonymous = FaceClient(None)
    task_id = send(anonymous, message()).json()["task"]["id"]
    assert Task.objects.get(pk=task_id).created_by is None
    assert anonymous.get(f"/v1/a2a/tasks/{task_id}").status_code == 200
    assert FaceClient(alice.raw_token).get(f"/v1/a2a/tasks/{task_id}").status_code == 404


def test_unauthenticated_sends_create_nothing(agent: Any) -> None:
    response = send(FaceClient(None), message())
    assert response.status_code == 401
    assert Task.objects.count() == 0


@pytest.mark.parametrize("immediately", [True, False])
def test_an_answer_reads_only_the_history_it_returns(
    immediately: bool,
    as_alice: FaceClient,
    alice: Any,
    make_task: Callable[..., Task],
    loaded_messages: list[str],
    settings: Any,
) -> None:
    """An answer to a question late in a long conversation, with historyLength 2: the
    answer's Task read every message of the conversation to show two."""
    settings.A2A_BLOCKING_TIMEOUT = 0.05
    task = make_task(alice, remote_task_id="remote-1", remote_context_id="remote-ctx")
    ids = talk(task, 40)
    task.require_input({"messageId": "q", "parts": [{"text": "Which market?"}]})
    answer = message(taskId=str(task.id), contextId=task.context_id)
    loaded_messages.clear()
    config = {"historyLength": 2, "returnImmediately": immediately}
    response = send(as_alice, answer, configuration=config)
    assert response.status_code == 200, response.content
    shown = [m["messageId"] for m in response.json()["task"]["history"]]
    assert shown == [shown[0], answer["messageId"]], shown
    assert len(loaded_messages) <= 3, loaded_messages  # the two shown, and the question
    assert not set(ids) & set(loaded_messages[:-2])
