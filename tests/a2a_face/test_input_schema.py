"""A send whose data part does not fit the skill's ``input_schema`` is refused on every
binding and version, naming the field, and creates nothing: before, the face created the
task and the agent received input the registry promises it never gets. A text-only
message is the agent's to read (no object schema could accept it) and is not checked."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from a2a.models import Task
from tests.a2a_face.conftest import FaceClient, error_reason

pytestmark = pytest.mark.django_db

V03 = {"A2A-Version": ""}  # 0.3 clients send no version
# The test skill's input_schema requires "product", a string.
WRONG = {"product": 5}


def _message(parts: list[dict[str, Any]]) -> dict[str, Any]:
    return {"messageId": f"m-{uuid.uuid4().hex[:8]}", "role": "ROLE_USER", "parts": parts}


def _send(data: dict[str, Any]) -> dict[str, Any]:
    message = _message([{"text": "please"}, {"data": data}])
    return {"message": message, "configuration": {"returnImmediately": True}}


def _violations(details: list[dict[str, Any]]) -> list[dict[str, str]]:
    bad_request = [d for d in details if d["@type"].endswith("google.rpc.BadRequest")]
    return bad_request[0]["fieldViolations"] if bad_request else []


def test_a_data_part_that_does_not_fit_is_invalid_params_on_http_json(
    as_alice: FaceClient, agent: Any
) -> None:
    response = as_alice.post("/v1/a2a/message:send", _send(WRONG))
    assert response.status_code == 400, response.content
    assert error_reason(response) == "INVALID_PARAMS"
    error = response.json()["error"]
    assert "input_schema" in error["message"]
    assert error["details"][0]["metadata"] == {"code": "input_invalid"}
    assert _violations(error["details"]) == [
        {"field": "data.product", "description": "5 is not of type 'string'"}
    ]
    assert not Task.objects.exists()


def test_a_missing_required_field_names_the_data_itself(as_alice: FaceClient, agent: Any) -> None:
    response = as_alice.post("/v1/a2a/message:send", _send({"market": "EU"}))
    assert response.status_code == 400, response.content
    (violation,) = _violations(response.json()["error"]["details"])
    assert violation == {"field": "data", "description": "'product' is a required property"}


def test_jsonrpc_and_0_3_and_streaming_sends_are_refused_too(
    as_alice: FaceClient, agent: Any
) -> None:
    rpc = as_alice.rpc("SendMessage", _send(WRONG)).json()
    assert rpc["error"]["code"] == -32602
    # Refused before a stream opens: a plain error, not an event.
    stream = as_alice.rpc("SendStreamingMessage", _send(WRONG)).json()
    assert stream["error"]["code"] == -32602
    rest_stream = as_alice.post("/v1/a2a/message:stream", _send(WRONG))
    assert (rest_stream.status_code, error_reason(rest_stream)) == (400, "INVALID_PARAMS")
    legacy_message = {
        "kind": "message",
        "messageId": "m-03",
        "role": "user",
        "parts": [{"kind": "data", "data": WRONG}],
    }
    legacy = as_alice.rpc("message/send", {"message": legacy_message}, **V03).json()
    assert legacy["error"]["code"] == -32602
    assert "input_schema" in legacy["error"]["message"]
    assert not Task.objects.exists()


def test_a_fitting_data_part_and_a_text_only_message_are_sent(
    as_alice: FaceClient, agent: Any
) -> None:
    fits = as_alice.post("/v1/a2a/message:send", _send({"product": "lamp"}))
    assert fits.status_code == 200, fits.content
    text = {"message": _message([{"text": "review my lamp"}])}
    text["configuration"] = {"returnImmediately": True}
    prose = as_alice.post("/v1/a2a/message:send", text)
    assert prose.status_code == 200, prose.content
    assert Task.objects.count() == 2


def test_a_skill_schema_that_cannot_be_applied_blames_the_skill_not_the_data(
    as_alice: FaceClient, agent: Any, skill: Any
) -> None:
    """One stored before such schemas were refused on save: its fault is the skill's."""
    type(skill).objects.filter(pk=skill.pk).update(input_schema={"$ref": "#/$defs/nowhere"})
    response = as_alice.post("/v1/a2a/message:send", _send({"product": "lamp"}))
    assert response.status_code == 400, response.content
    (violation,) = _violations(response.json()["error"]["details"])
    assert violation["field"] == "metadata.skillId"
    assert "does not resolve" in violation["description"]
    assert not Task.objects.exists()
