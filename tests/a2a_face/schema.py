"""The A2A 1.0 JSON schema (vendored from the specification, ``spec/a2a-1.0.json``) and
checks of the face's answers against it.

:func:`check_answer` is called by :class:`tests.a2a_face.conftest.FaceClient` on every
response, so every test of the face also checks the shape of what it got: results against
the schema's definitions (``additionalProperties: false``: no 0.3 leftovers), timestamps
ending in ``Z``, HTTP+JSON errors as AIP-193 with ``error.code`` equal to the HTTP status,
JSON-RPC envelopes with exactly their keys, SSE events one by one.
"""

from __future__ import annotations

import json
import re
from functools import cache
from pathlib import Path
from typing import Any

from jsonschema import Draft202012Validator
from referencing import Registry, Resource

from a2a.cards import LEGACY_CARD_FIELDS
from a2a.face.asgi import speaks_jsonrpc

SPEC = Path(__file__).parent / "spec" / "a2a-1.0.json"
TIMESTAMP = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$")

# JSON-RPC method → the definition of its result (None: an empty object).
JSONRPC_RESULTS: dict[str, str | None] = {
    "SendMessage": "Send Message Response",
    "SendStreamingMessage": "Stream Response",
    "GetTask": "Task",
    "ListTasks": "List Tasks Response",
    "CancelTask": "Task",
    "SubscribeToTask": "Stream Response",
    "CreateTaskPushNotificationConfig": "Task Push Notification Config",
    "GetTaskPushNotificationConfig": "Task Push Notification Config",
    "ListTaskPushNotificationConfigs": "List Task Push Notification Configs Response",
    "DeleteTaskPushNotificationConfig": None,
    "GetExtendedAgentCard": "Agent Card",
}
# The 0.3 fields a card carries for 0.3 clients (see a2a/cards.py), as the SDK's do:
# top-level ones, and the 0.3 keys beside each security scheme's 1.0 one.
CARD_COMPAT_KEYS = set(LEGACY_CARD_FIELDS)
SCHEME_COMPAT_KEYS = {"type", "scheme", "description", "in", "name", "bearerFormat"}


def core_card(card: dict[str, Any]) -> dict[str, Any]:
    """The card without its 0.3 compatibility fields: what the 1.0 schema describes."""
    core = {k: v for k, v in card.items() if k not in CARD_COMPAT_KEYS}
    if isinstance(core.get("securitySchemes"), dict):
        core["securitySchemes"] = {
            name: {k: v for k, v in scheme.items() if k not in SCHEME_COMPAT_KEYS}
            for name, scheme in core["securitySchemes"].items()
        }
    return core


@cache
def _registry() -> tuple[dict[str, Any], Registry]:
    definitions = json.loads(SPEC.read_text())["definitions"]
    resources = []
    for title, schema in definitions.items():
        name = title.replace(" ", "")
        package = "google.protobuf" if name in ("Struct", "Value", "Timestamp") else "lf.a2a.v1"
        resources.append((f"{package}.{name}.jsonschema.json", Resource.from_contents(schema)))
    return definitions, Registry().with_resources(resources)


def validate(definition: str, value: Any) -> None:
    """Raise ``jsonschema.ValidationError`` unless ``value`` fits ``definition``."""
    definitions, registry = _registry()
    Draft202012Validator(definitions[definition], registry=registry).validate(value)
    _check_timestamps(value)


def _check_timestamps(value: Any, key: str = "") -> None:
    if isinstance(value, dict):
        for k, v in value.items():
            if k in ("data", "metadata"):
                continue  # free-form JSON
            _check_timestamps(v, k)
    elif isinstance(value, list):
        for item in value:
            _check_timestamps(item, key)
    elif key == "timestamp":
        assert isinstance(value, str), value
        assert TIMESTAMP.match(value), f"timestamp {value!r}"


def rest_result(method: str, path: str) -> str | None:
    """The definition of a successful HTTP+JSON answer, by method and path."""
    tail = path.split("?", 1)[0].rstrip("/").rsplit("/v1/a2a", 1)[-1]
    if tail.endswith("message:send"):
        return "Send Message Response"
    if tail.endswith(("message:stream", ":subscribe")):
        return "Stream Response"
    if tail.endswith(":cancel"):
        return "Task"
    if "/pushNotificationConfigs" in tail:
        if tail.endswith("/pushNotificationConfigs"):
            if method == "GET":
                return "List Task Push Notification Configs Response"
            return "Task Push Notification Config"
        return None if method == "DELETE" else "Task Push Notification Config"
    if tail.endswith("/tasks"):
        return "List Tasks Response"
    if "/tasks/" in tail:
        return "Task"
    if tail.endswith(("extendedAgentCard", "agent-card.json")):
        return "Agent Card"
    return None


def sse_events(body: bytes) -> list[Any]:
    """The JSON of every ``data:`` event of an SSE body."""
    events = []
    for frame in body.decode().split("\n\n"):
        lines = [ln for ln in frame.splitlines() if ln.startswith("data: ")]
        if lines:
            events.append(json.loads("".join(ln[6:] for ln in lines)))
    return events


def _check_result(definition: str | None, value: Any) -> None:
    if definition is None:
        assert value in ({}, None), value
        return
    if definition == "Agent Card" and isinstance(value, dict):
        value = core_card(value)
    if isinstance(value, dict) and "error" in value and definition == "Stream Response":
        check_rest_error(value, None)
        return
    validate(definition, value)


def check_rest_error(body: Any, status: int | None) -> None:
    """AIP-193: ``{"error": {"code", "status", "message", "details"}}``, code = status."""
    assert set(body) == {"error"}, body
    error = body["error"]
    assert set(error) <= {"code", "status", "message", "details"}, error
    if status is not None:
        assert error["code"] == status, (error["code"], status)
    assert error["details"][0]["@type"] == "type.googleapis.com/google.rpc.ErrorInfo"


def check_jsonrpc_envelope(body: Any, method: str | None) -> None:
    """Exactly ``jsonrpc``, ``id`` and one of ``result`` / ``error`` (with code, message,
    data: [ErrorInfo])."""
    assert body["jsonrpc"] == "2.0", body
    if "error" in body:
        assert set(body) == {"jsonrpc", "id", "error"}, body
        assert set(body["error"]) == {"code", "message", "data"}, body
        assert isinstance(body["error"]["code"], int)
        assert body["error"]["data"][0]["@type"] == "type.googleapis.com/google.rpc.ErrorInfo"
        return
    assert set(body) == {"jsonrpc", "id", "result"}, body
    if method in JSONRPC_RESULTS:
        _check_result(JSONRPC_RESULTS[method], body["result"])


def check_stream(body: bytes, rpc_method: str | None = None) -> list[Any]:
    """Check every event of an SSE body (JSON-RPC envelopes when ``rpc_method``); returns
    the events."""
    events = sse_events(body)
    for event in events:
        if rpc_method is not None:
            check_jsonrpc_envelope(event, rpc_method)
        else:
            _check_result("Stream Response", event)
    return events


def check_answer(method: str, path: str, response: Any, rpc_method: str | None = None) -> None:
    """Check one response of the face (called by the test client for every request)."""
    if response.status_code in (304,) or ("/v1/a2a" not in path and "agent-card" not in path):
        return
    content_type = response.get("Content-Type", "")
    jsonrpc = speaks_jsonrpc(path, method)
    if content_type.startswith("text/event-stream"):
        return  # streams are checked event by event: check_stream
    assert content_type == "application/json", (path, content_type)
    body = response.json()
    if jsonrpc:
        check_jsonrpc_envelope(body, rpc_method)
        return
    if response.status_code >= 400:
        check_rest_error(body, response.status_code)
        return
    _check_result(rest_result(method, path), body)
