"""Structure-aware fuzzing of the A2A face: valid requests of every method, on both
bindings, with one value somewhere replaced by another JSON value (wrong kinds, NUL
bytes, lone surrogates, huge and non-finite numbers, deep nesting). Every answer is an
A2A answer of its binding (checked against the specification's schema by
:class:`~tests.a2a_face.conftest.FaceClient`), never a 5xx nor an INTERNAL error.
Seeded and bounded, so a run is repeatable and quick; ``FUZZ_N=5000 FUZZ_RANDOM=1`` runs
a long random one."""

from __future__ import annotations

import copy
import json
import os
from typing import Any
from urllib.parse import quote

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.a2a_face.conftest import FaceClient

pytestmark = pytest.mark.django_db

TASK = "00000000-0000-4000-8000-000000000001"
MESSAGE = {
    "messageId": "m-1",
    "role": "ROLE_USER",
    "parts": [{"text": "hello", "metadata": {"k": 1}}, {"data": {"a": [1, 2]}}],
    "metadata": {"x": "y"},
}
REQUESTS: dict[str, dict[str, Any]] = {
    "SendMessage": {
        "message": MESSAGE,
        "configuration": {
            "returnImmediately": True,
            "historyLength": 2,
            "acceptedOutputModes": ["application/json"],
            "taskPushNotificationConfig": {
                "url": "https://example.com/hook",
                "token": "t",
                "authentication": {"scheme": "Bearer", "credentials": "c"},
            },
        },
        "metadata": {"a": 1},
    },
    "GetTask": {"id": TASK, "historyLength": 1},
    "ListTasks": {
        "contextId": "ctx",
        "status": "TASK_STATE_WORKING",
        "pageSize": 10,
        "pageToken": "",
        "historyLength": 1,
        "statusTimestampAfter": "2026-01-01T00:00:00Z",
        "includeArtifacts": True,
    },
    "CancelTask": {"id": TASK, "metadata": {"why": "x"}},
    "CreateTaskPushNotificationConfig": {
        "taskId": TASK,
        "url": "https://example.com/hook",
        "token": "t",
        "authentication": {"scheme": "Bearer", "credentials": "c"},
    },
    "GetTaskPushNotificationConfig": {"taskId": TASK, "id": "c-1"},
    "ListTaskPushNotificationConfigs": {"taskId": TASK, "pageSize": 5, "pageToken": ""},
    "DeleteTaskPushNotificationConfig": {"taskId": TASK, "id": "c-1"},
    "GetExtendedAgentCard": {},
}

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=False, allow_infinity=False),
    st.sampled_from(["", "\x00", "\ud800", "a\x00b", "x" * 300, "TASK_STATE_WORKING", TASK]),
    st.text(max_size=20),
)
values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=8,
)


def _paths(value: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    found = [path]
    if isinstance(value, dict):
        for key, inner in value.items():
            found += _paths(inner, (*path, key))
    elif isinstance(value, list):
        for index, inner in enumerate(value):
            found += _paths(inner, (*path, index))
    return found


@st.composite
def mutated(draw: st.DrawFn) -> tuple[str, Any]:
    method = draw(st.sampled_from(sorted(REQUESTS)))
    params: Any = copy.deepcopy(REQUESTS[method])
    for _ in range(draw(st.integers(1, 2))):
        path = draw(st.sampled_from(_paths(params)))
        new = draw(values)
        if not path:
            params = new
            continue
        holder = params
        for step in path[:-1]:
            holder = holder[step]
        if draw(st.booleans()) or not isinstance(holder, dict):
            holder[path[-1]] = new
        else:
            del holder[path[-1]]
    return method, params


def _no_server_error(response: Any) -> None:
    assert response.status_code < 500, response.content[:500]
    if response.get("Content-Type", "").startswith("application/json"):
        body = response.json()
        error = body.get("error") if isinstance(body, dict) else None
        if isinstance(error, dict):
            assert error.get("code") != -32603, error
            assert error.get("status") != "INTERNAL", error


FUZZ = settings(
    max_examples=int(os.environ.get("FUZZ_N", "150")),
    deadline=None,
    derandomize=not os.environ.get("FUZZ_RANDOM"),
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


@FUZZ
@given(case=mutated())
def test_jsonrpc_answers_every_mutated_request(
    case: tuple[str, Any], as_alice: FaceClient, agent: Any
) -> None:
    method, params = case
    body = {"jsonrpc": "2.0", "id": "1", "method": method, "params": params}
    _no_server_error(as_alice.post("/v1/a2a/jsonrpc", json.dumps(body)))


def _escaped(value: Any) -> str:
    """``value`` for a URL, as a client would write it: a string's UTF-8 bytes escaped
    (a lone surrogate's as the bytes it would take), anything else as its JSON."""
    text = value if isinstance(value, str) else json.dumps(value)
    return quote(text, safe="", errors="surrogatepass")


@FUZZ
@given(case=mutated(), raw_id=st.sampled_from([TASK, "", "x" * 300, "%00", "..", "a b"]))
def test_http_json_answers_every_mutated_request(
    case: tuple[str, Any], raw_id: str, as_alice: FaceClient, agent: Any
) -> None:
    method, params = case
    body = params if isinstance(params, dict) else {}
    task = _escaped(body.get("id", body.get("taskId", raw_id)))
    pairs = [f"{_escaped(k)}={_escaped(v)}" for k, v in body.items() if not isinstance(v, dict)]
    query = "?" + "&".join(pairs)
    base = "/v1/a2a"
    if method == "SendMessage":
        response = as_alice.post(f"{base}/message:send", json.dumps(params))
    elif method == "GetTask":
        response = as_alice.get(f"{base}/tasks/{task}{query}")
    elif method == "ListTasks":
        response = as_alice.get(f"{base}/tasks{query}")
    elif method == "CancelTask":
        response = as_alice.post(f"{base}/tasks/{task}:cancel", json.dumps(params))
    elif method == "CreateTaskPushNotificationConfig":
        response = as_alice.post(f"{base}/tasks/{task}/pushNotificationConfigs", json.dumps(params))
    elif method == "ListTaskPushNotificationConfigs":
        response = as_alice.get(f"{base}/tasks/{task}/pushNotificationConfigs{query}")
    elif method == "GetExtendedAgentCard":
        response = as_alice.get(f"{base}/extendedAgentCard{query}")
    else:
        config = _escaped(body.get("id", "c-1"))
        path = f"{base}/tasks/{task}/pushNotificationConfigs/{config}"
        if method == "DeleteTaskPushNotificationConfig":
            response = as_alice.delete(path)
        else:
            response = as_alice.get(path)
    _no_server_error(response)


LEGACY = {  # A2A 0.3's JSON-RPC methods, as a 0.3 client sends them
    "SendMessage": "message/send",
    "GetTask": "tasks/get",
    "CancelTask": "tasks/cancel",
    "CreateTaskPushNotificationConfig": "tasks/pushNotificationConfig/set",
    "GetTaskPushNotificationConfig": "tasks/pushNotificationConfig/get",
    "ListTaskPushNotificationConfigs": "tasks/pushNotificationConfig/list",
    "DeleteTaskPushNotificationConfig": "tasks/pushNotificationConfig/delete",
}


@FUZZ
@given(case=mutated().filter(lambda case: case[0] in LEGACY))
def test_legacy_jsonrpc_answers_every_mutated_request(
    case: tuple[str, Any], agent: Any, alice: Any
) -> None:
    method, params = case
    if method == "SendMessage" and isinstance(params, dict):
        params = {**params, "message": _legacy_message(params.get("message"))}
    client = FaceClient(alice.raw_token, check=False)  # 0.3 answers: not the 1.0 schema
    client.headers = {"Authorization": client.headers["Authorization"]}  # no A2A-Version
    body = {"jsonrpc": "2.0", "id": 1, "method": LEGACY[method], "params": params}
    _no_server_error(client.post("/v1/a2a/jsonrpc", json.dumps(body)))


def _legacy_message(message: Any) -> Any:
    """A 1.0 message as 0.3 spells it (``kind``, lower-case role, typed parts)."""
    if not isinstance(message, dict):
        return message
    parts = message.get("parts")
    if isinstance(parts, list):
        parts = [{"kind": "text", **p} if isinstance(p, dict) and "text" in p else p for p in parts]
    return {**message, "kind": "message", "role": "user", "parts": parts}
