"""A client's ``acceptedOutputModes``: one that accepts text and no JSON (``["text"]``,
as several hosts and chat clients send) sees an agent's data parts as JSON in text parts,
everywhere the task is shown (send, get, list, streams, pushes: all built from
``task_json``); its own messages stay as it sent them. Other clients see the parts as
the agent wrote them."""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest
from django.utils import timezone
from starlette.responses import JSONResponse

from a2a import agent_updates
from a2a.face import sse
from a2a.models import Task
from tests.a2a_face.conftest import FaceClient, error_reason
from tests.support.scripted_agent import run_out, run_scripted_agent, start

pytestmark = pytest.mark.django_db

RESULT = {"verdict": "pass", "score": 0.5}


def send(client: FaceClient, modes: Any = None, **config: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "message": {
            "messageId": f"m-{uuid.uuid4().hex[:8]}",
            "role": "ROLE_USER",
            "parts": [{"data": {"product": "lamp"}}],
        },
        "configuration": {"returnImmediately": True, **config},
    }
    if modes is not None:
        body["configuration"]["acceptedOutputModes"] = modes
    answer = client.rpc("SendMessage", body).json()
    assert "result" in answer, answer
    return answer["result"]["task"]


def finish(task_id: str) -> None:
    """The agent completes the task with a data artifact and a data status message."""
    task = Task.objects.get(pk=task_id)
    agent_updates.apply_agent_update(
        task,
        status={
            "state": "TASK_STATE_COMPLETED",
            "message": {"messageId": "a-1", "role": "ROLE_AGENT", "parts": [{"data": RESULT}]},
        },
        artifacts=[{"artifactId": "r", "parts": [{"data": RESULT, "metadata": {"k": 1}}]}],
        remote={"id": "r-1", "contextId": "c-1"},
        via="a2a",
    )


def get(client: FaceClient, task_id: str) -> dict[str, Any]:
    answer = client.rpc("GetTask", {"id": task_id, "historyLength": 10}).json()
    return answer["result"]


@pytest.mark.parametrize("modes", [["text"], ["text/plain"], ["TEXT/PLAIN; charset=utf-8"]])
def test_a_text_only_client_sees_data_as_json_text(
    as_alice: FaceClient, agent: Any, modes: list[str]
) -> None:
    created = send(as_alice, modes)
    finish(created["id"])
    task = get(as_alice, created["id"])
    [part] = task["artifacts"][0]["parts"]
    assert json.loads(part["text"]) == RESULT
    assert part["metadata"] == {"k": 1}
    assert "data" not in part
    assert json.loads(task["status"]["message"]["parts"][0]["text"]) == RESULT
    # Its own message is shown as it sent it.
    mine = [m for m in task["history"] if m["role"] == "ROLE_USER"]
    assert mine[0]["parts"] == [{"data": {"product": "lamp"}}]
    # Streams and pushes are built from the same JSON.
    events = sse.stream_events(sse.snapshot(created["id"])["task"])
    assert "text" in events[0]["artifactUpdate"]["artifact"]["parts"][0]
    # What the platform keeps is the agent's data: the output is validated as before.
    assert Task.objects.get(pk=created["id"]).output == RESULT


@pytest.mark.parametrize(
    "modes", [None, [], ["application/json"], ["text", "application/json"], ["*/*"]]
)
def test_other_clients_see_the_data_parts(
    as_alice: FaceClient, agent: Any, modes: list[str] | None
) -> None:
    created = send(as_alice, modes)
    finish(created["id"])
    task = get(as_alice, created["id"])
    assert task["artifacts"][0]["parts"][0]["data"] == RESULT
    assert task["status"]["message"]["parts"][0]["data"] == RESULT


def test_the_rest_binding_takes_the_field_in_either_name(as_alice: FaceClient, agent: Any) -> None:
    for name in ("acceptedOutputModes", "accepted_output_modes"):
        body = {
            "message": {
                "messageId": f"m-{uuid.uuid4().hex[:8]}",
                "role": "ROLE_USER",
                "parts": [{"data": {"product": "lamp"}}],
            },
            "configuration": {"returnImmediately": True, name: ["text"]},
        }
        created = as_alice.post("/v1/a2a/message:send", body).json()["task"]
        finish(created["id"])
        task = as_alice.get(f"/v1/a2a/tasks/{created['id']}").json()
        assert json.loads(task["artifacts"][0]["parts"][0]["text"]) == RESULT


def test_a_reply_with_other_modes_changes_what_the_client_sees(
    as_alice: FaceClient, agent: Any
) -> None:
    created = send(as_alice, ["text"])
    task = Task.objects.get(pk=created["id"])
    agent_updates.apply_agent_update(
        task,
        status={
            "state": "TASK_STATE_INPUT_REQUIRED",
            "message": {"messageId": "q", "role": "ROLE_AGENT", "parts": [{"data": {"ask": 1}}]},
        },
        remote={"id": "r-1", "contextId": "c-1"},
        via="a2a",
    )
    asked = get(as_alice, created["id"])
    assert json.loads(asked["status"]["message"]["parts"][0]["text"]) == {"ask": 1}
    body = {
        "message": {
            "messageId": "m-reply",
            "role": "ROLE_USER",
            "taskId": created["id"],
            "parts": [{"text": "EU"}],
        },
        "configuration": {"returnImmediately": True, "acceptedOutputModes": ["application/json"]},
    }
    assert "result" in as_alice.rpc("SendMessage", body).json()
    finish(created["id"])
    task = get(as_alice, created["id"])
    assert task["artifacts"][0]["parts"][0]["data"] == RESULT


@pytest.mark.parametrize("modes", ["text", [1], [None], ["x" * 201], ["text"] * 51, {"text": True}])
def test_output_modes_of_the_wrong_shape_are_invalid_params_and_create_nothing(
    as_alice: FaceClient, agent: Any, modes: Any
) -> None:
    before = Task.objects.count()
    body = {
        "message": {"messageId": "m-bad", "role": "ROLE_USER", "parts": [{"text": "hi"}]},
        "configuration": {"acceptedOutputModes": modes},
    }
    answer = as_alice.rpc("SendMessage", body).json()
    assert answer["error"]["code"] == -32602
    assert "acceptedOutputModes" in answer["error"]["message"]
    rest = as_alice.post("/v1/a2a/message:send", body)
    assert (rest.status_code, error_reason(rest)) == (400, "INVALID_PARAMS")
    assert Task.objects.count() == before


def test_a_0_3_client_that_accepts_text_alone_gets_text_parts(
    as_alice: FaceClient, agent: Any
) -> None:
    """A2A 0.3 clients name the field the same (some SDKs require it to be non-empty)."""
    params = {
        "message": {
            "kind": "message",
            "messageId": "m-03",
            "role": "user",
            "parts": [{"kind": "data", "data": {"product": "lamp"}}],
        },
        "configuration": {"blocking": False, "acceptedOutputModes": ["text"]},
    }
    created = as_alice.rpc("message/send", params, **{"A2A-Version": ""}).json()["result"]
    finish(created["id"])
    task = as_alice.rpc("tasks/get", {"id": created["id"]}, **{"A2A-Version": ""}).json()
    [part] = task["result"]["artifacts"][0]["parts"]
    assert part["kind"] == "text"
    assert json.loads(part["text"]) == RESULT


# --- passed on to the agent ---------------------------------------------------------------


def _completed(binding: str, version: str, body: Any) -> JSONResponse:
    """The scripted agent's answer to a send: its task, completed with the result."""
    if version == "0.3":
        part = {"kind": "data", "data": RESULT}
        status = {"state": "completed"}
        result = {"kind": "task", "id": "t1", "contextId": "c", "status": status}
    else:
        part = {"data": RESULT}
        result = {"id": "t1", "contextId": "c", "status": {"state": "TASK_STATE_COMPLETED"}}
    result["artifacts"] = [{"artifactId": "r", "parts": [part]}]
    if binding == "JSONRPC":
        return JSONResponse({"jsonrpc": "2.0", "id": body["id"], "result": result})
    return JSONResponse(result if version == "0.3" else {"task": result})


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(
    ("binding", "version"), [("HTTP+JSON", "1.0"), ("JSONRPC", "1.0"), ("JSONRPC", "0.3")]
)
def test_the_callers_output_modes_go_to_the_agent(
    as_alice: FaceClient,
    alice: Any,
    make_agent: Any,
    make_skill: Any,
    settings: Any,
    binding: str,
    version: str,
) -> None:
    """The agent is told what the caller accepts (A2A: it SHOULD tailor its output to
    it), in the send's ``configuration``; a task of the tasks API names none."""
    settings.ALLOW_LOOPBACK_URLS = True
    sent: list[dict[str, Any]] = []

    def answer(kind: str, body: Any) -> JSONResponse:
        sent.append(body.get("params", body)["configuration"])
        return _completed(binding, version, body)

    with run_scripted_agent() as agent:
        agent.answer = answer
        make_agent(
            skills=[make_skill(id="ce-review")],
            a2a_endpoint=agent.url,
            card_read_at=timezone.now(),
            protocol_binding=binding,
            protocol_version=version,
        )
        task_id = send(as_alice, ["text/plain", "text"])["id"]
        assert run_out(Task.objects.get(pk=task_id)).state == "TASK_STATE_COMPLETED"
        assert run_out(start(alice)).state == "TASK_STATE_COMPLETED"
    assert sent[0]["acceptedOutputModes"] == ["text/plain", "text"]
    assert "acceptedOutputModes" not in sent[1]
