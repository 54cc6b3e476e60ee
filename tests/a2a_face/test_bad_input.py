"""Bad bytes at the face, on both bindings: NUL and lone surrogates anywhere, JSON nested
100,000 levels, absurd versions. Each gets a clear 4xx (or JSON-RPC error) naming the
problem, changes nothing, and never a 5xx or HTML; then a bounded, seeded fuzz. These run
on SQLite and on PostgreSQL (pass 2 of make test), which refuses NUL in text."""

from __future__ import annotations

import json
import random
import uuid
import warnings
from collections.abc import Callable
from typing import Any
from urllib.parse import quote

import pytest
from django.test import Client

from a2a.face.asgi import speaks_jsonrpc
from a2a.models import Task
from a2a.push_models import PushNotificationConfig
from tests.a2a_face.conftest import FaceClient, error_reason

pytestmark = pytest.mark.django_db

NUL = "a\x00b"
SURROGATE = "a\udcffb"
DEEP = "[" * 100_000 + "]" * 100_000
DEEP_OBJECT = '{"a":' * 100_000 + "1" + "}" * 100_000


def _message(**overrides: Any) -> dict[str, Any]:
    return {
        "messageId": "m-1",
        "role": "ROLE_USER",
        "parts": [{"text": "hello"}, {"data": {"k": "v"}}],
    } | overrides


def _bad_messages(bad: str) -> list[dict[str, Any]]:
    return [
        _message(parts=[{"text": bad}]),
        _message(messageId=bad),
        _message(parts=[{"data": {bad: 1}}]),
        _message(parts=[{"data": {"k": [bad]}}]),
        _message(contextId=bad),
        _message(metadata={"skillId": bad}),
    ]


@pytest.mark.parametrize("bad", [NUL, SURROGATE], ids=["nul", "surrogate"])
def test_bad_text_in_a_send_is_refused_on_both_bindings(
    as_alice: FaceClient, agent: Any, bad: str
) -> None:
    for message in _bad_messages(bad):
        body = {"message": message, "configuration": {"returnImmediately": True}}
        rest = as_alice.post("/v1/a2a/message:send", body)
        assert rest.status_code == 400, (message, rest.content)
        assert error_reason(rest) == "INVALID_PARAMS"
        assert "message" in rest.json()["error"]["message"]
        rpc = as_alice.rpc("SendMessage", body)
        assert rpc.status_code == 200
        assert rpc.json()["error"]["code"] == -32602
    assert Task.objects.count() == 0


@pytest.mark.parametrize("bad", ["a%00b", "%00", "a%ED%B2%80b"])
def test_bad_text_in_a_query_string_is_refused(as_alice: FaceClient, bad: str) -> None:
    response = as_alice.get(f"/v1/a2a/tasks?contextId={bad}")
    assert response.status_code in (200, 400)
    if response.status_code == 400:
        assert error_reason(response) == "INVALID_PARAMS"
    else:  # an invalid UTF-8 sequence is decoded as U+FFFD: an ordinary string
        assert response.json()["tasks"] == []


def test_a_nul_in_a_path_is_not_found(as_alice: FaceClient) -> None:
    response = as_alice.get("/v1/a2a/tasks/a%00b")
    assert response.status_code in (400, 404)


@pytest.mark.parametrize("where", ["id", "method", "params.id"])
@pytest.mark.parametrize("bad", [NUL, SURROGATE], ids=["nul", "surrogate"])
def test_bad_text_in_a_jsonrpc_envelope_is_a_jsonrpc_error(
    as_alice: FaceClient, where: str, bad: str
) -> None:
    body: dict[str, Any] = {"jsonrpc": "2.0", "id": "1", "method": "GetTask", "params": {"id": "x"}}
    if where == "params.id":
        body["params"]["id"] = bad
    else:
        body[where] = bad
    response = as_alice.post("/v1/a2a/jsonrpc", body)
    assert response.status_code == 200
    error = response.json()["error"]
    assert error["code"] in (-32600, -32602)
    if where == "id":
        assert response.json()["id"] is None


def test_bad_text_in_a_push_config_is_refused(
    as_alice: FaceClient, alice: Any, make_task: Callable[..., Task]
) -> None:
    task = make_task(alice)
    for config in ({"url": f"https://example.com/{NUL}"}, {"url": "https://x.org", "id": NUL}):
        response = as_alice.post(f"/v1/a2a/tasks/{task.id}/pushNotificationConfigs", config)
        assert error_reason(response) == "INVALID_PARAMS"
    assert PushNotificationConfig.objects.count() == 0


@pytest.mark.parametrize(
    "config",
    [
        {"url": "https://example.com/hook", "id": "x" * 201},
        {"url": "https://example.com/hook", "token": "t" * 1001},
        {"url": "https://example.com/hook", "authentication": {"scheme": "B" * 101}},
        {"url": "https://example.com/" + "p" * 2000},
    ],
    ids=["id", "token", "scheme", "url"],
)
def test_a_push_config_field_longer_than_its_column_is_refused(
    as_alice: FaceClient, alice: Any, make_task: Callable[..., Task], config: dict[str, Any]
) -> None:
    """PostgreSQL refused the longer value with a 500 (SQLite stored it): refused on every
    way a config comes in, the task's own route, JSON-RPC and with a send."""
    task = make_task(alice)
    response = as_alice.post(f"/v1/a2a/tasks/{task.id}/pushNotificationConfigs", config)
    assert response.status_code == 400, response.content
    assert error_reason(response) == "INVALID_PARAMS"
    assert "too long" in response.json()["error"]["message"]
    rpc = as_alice.rpc("CreateTaskPushNotificationConfig", {**config, "taskId": str(task.id)})
    assert rpc.json()["error"]["code"] == -32602
    body = {
        "message": _message(),
        "configuration": {"returnImmediately": True, "taskPushNotificationConfig": config},
    }
    sent = as_alice.post("/v1/a2a/message:send", body)
    assert error_reason(sent) == "INVALID_PARAMS"
    assert PushNotificationConfig.objects.count() == 0
    assert Task.objects.count() == 1  # the send stored no task


@pytest.mark.parametrize("number", ["NaN", "Infinity", "1e400", "-1e999", "1" + "0" * 400])
def test_nan_infinity_and_numbers_beyond_a_float_are_not_json(
    as_alice: FaceClient, agent: Any, number: str
) -> None:
    """Python reads 1e400 as infinity; PostgreSQL's jsonb refuses it and NaN (a 500). An
    integer as large reached the agent, whose SDK (numbers are doubles) refused it."""
    message = '{"messageId": "m", "role": "ROLE_USER", "parts": [{"data": {"n": N}}]}'
    message = message.replace("N", number)
    rest = as_alice.post("/v1/a2a/message:send", '{"message": ' + message + "}")
    assert rest.status_code == 400, rest.content
    assert error_reason(rest) == "INVALID_REQUEST"
    assert "number" in rest.json()["error"]["message"]
    envelope = '{"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": M}}'
    rpc = as_alice.post("/v1/a2a/jsonrpc", envelope.replace("M", message))
    assert rpc.json()["error"]["code"] == -32700
    assert not Task.objects.exists()


@pytest.mark.parametrize("payload", [DEEP, DEEP_OBJECT], ids=["array", "object"])
@pytest.mark.parametrize(
    "path",
    [
        "/v1/a2a/message:send",
        "/v1/a2a/message:stream",
        f"/v1/a2a/tasks/{uuid.uuid4()}:cancel",
        f"/v1/a2a/tasks/{uuid.uuid4()}/pushNotificationConfigs",
        "/v1/a2a/agent-one/message:send",
    ],
)
def test_deep_json_is_refused_before_parsing(as_alice: FaceClient, path: str, payload: str) -> None:
    response = as_alice.post(path, payload, content_type="application/json")
    assert response.status_code == 400
    assert error_reason(response) == "INVALID_REQUEST"
    assert "nested" in response.json()["error"]["message"]


@pytest.mark.parametrize("payload", [DEEP, DEEP_OBJECT], ids=["array", "object"])
def test_deep_json_on_jsonrpc_is_a_jsonrpc_error(as_alice: FaceClient, payload: str) -> None:
    response = as_alice.post("/v1/a2a/jsonrpc", payload, content_type="application/json")
    assert response.status_code == 200
    assert response.json()["error"]["code"] == -32600


def test_deep_params_inside_a_jsonrpc_envelope_are_refused(as_alice: FaceClient) -> None:
    body = '{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":' + DEEP_OBJECT + "}"
    response = as_alice.post("/v1/a2a/jsonrpc", body, content_type="application/json")
    assert response.json()["error"]["code"] == -32600


def test_huge_numbers_are_invalid_not_a_crash(as_alice: FaceClient, agent: Any) -> None:
    body = (
        '{"message": {"messageId": "m", "role": "ROLE_USER", "parts": [{"data": {"n": '
        + ("9" * 5000)
        + "}}]}}"
    )
    response = as_alice.post("/v1/a2a/message:send", body, content_type="application/json")
    assert response.status_code == 400
    rpc = as_alice.rpc("GetTask", {"id": "x", "historyLength": 10**30})
    assert rpc.json()["error"]["code"] == -32602


# --- a bounded fuzz ------------------------------------------------------------------

# Path → the methods it serves (a wrong one is tried now and then too).
PATHS = {
    "/v1/a2a/message:send": ["POST"],
    "/v1/a2a/message:stream": ["POST"],
    "/v1/a2a/tasks": ["GET"],
    "/v1/a2a/tasks/{task}": ["GET"],
    "/v1/a2a/tasks/{task}:cancel": ["POST"],
    "/v1/a2a/tasks/{task}:subscribe": ["GET", "POST"],
    "/v1/a2a/tasks/{task}/pushNotificationConfigs": ["GET", "POST"],
    "/v1/a2a/tasks/{task}/pushNotificationConfigs/{text}": ["GET", "DELETE"],
    "/v1/a2a/extendedAgentCard": ["GET"],
    "/v1/a2a/jsonrpc": ["POST"],
    "/v1/a2a/jsonrpc/": ["POST"],
    "/v1/a2a/agent-one/jsonrpc": ["POST"],
    "/v1/a2a": ["POST"],  # the interface's own URL takes JSON-RPC posts
    "/v1/a2a/agent-one/": ["POST"],
    "/v1/a2a/agent-one/message:send": ["POST"],
    "/v1/a2a/{text}": ["GET"],
}
METHODS_1_0 = ["SendMessage", "GetTask", "ListTasks", "CancelTask", "SubscribeToTask"]
METHODS_0_3 = ["message/send", "tasks/get", "tasks/cancel", "tasks/pushNotificationConfig/set"]
KEYS = [
    "message",
    "messageId",
    "message_id",
    "role",
    "parts",
    "text",
    "data",
    "id",
    "taskId",
    "task_id",
    "contextId",
    "historyLength",
    "history_length",
    "pageSize",
    "configuration",
    "returnImmediately",
    "url",
    "authentication",
    "kind",
    "metadata",
    "status",
    "tenant",
]


class Fuzzer:
    """Random, seeded A2A-ish requests: real keys and methods, hostile values."""

    def __init__(self, seed: int, task_id: str) -> None:
        self.rng = random.Random(seed)
        self.task_id = task_id

    def text(self) -> str:
        return self.rng.choice(
            [
                "",
                "x",
                NUL,
                SURROGATE,
                "\udfff",
                "ROLE_USER",
                "TASK_STATE_WORKING",
                "user",
                self.task_id,
                str(uuid.uuid4()),
                "9" * 5000,
                "é" * 300,
                "https://example.com/h",
                "http://[::ffff:127.0.0.1]/",
                "../../etc",
                "%00",
            ]
        )

    def value(self, depth: int = 0) -> Any:
        kind = self.rng.randrange(9 if depth < 4 else 5)
        if kind == 0:
            return self.text()
        if kind == 1:
            return self.rng.choice([0, -1, 1, 2**31, 2**64, 10**40, 0.5, float("1e308")])
        if kind == 2:
            return self.rng.choice([True, False, None])
        if kind == 3:
            return self.rng.choice(KEYS)
        if kind == 4:
            return []
        if kind in (5, 6, 7):
            return {
                self.rng.choice([*KEYS, self.text()]): self.value(depth + 1)
                for _ in range(self.rng.randrange(1, 5))
            }
        return [self.value(depth + 1) for _ in range(self.rng.randrange(1, 4))]

    def mutated(self, base: dict[str, Any]) -> dict[str, Any]:
        """``base`` with one field (or one new field) replaced by a hostile value."""
        out = dict(base)
        out[self.rng.choice([*base, *KEYS])] = self.value()
        return out

    def message(self) -> dict[str, Any]:
        base = {
            "messageId": "m-1",
            "role": self.rng.choice(["ROLE_USER", "user"]),
            "parts": [{"text": "x"}, {"data": {"behaviour": "complete"}}],
            "contextId": "c-1",
        }
        if self.rng.random() < 0.5:
            base["parts"] = [self.mutated({"text": "x"})]
            return base
        return self.mutated(base)

    def params(self) -> Any:
        kind = self.rng.randrange(4)
        if kind == 0:
            return self.value()
        if kind == 1:
            return self.mutated({"id": self.task_id, "historyLength": 1})
        if kind == 2:
            config = {"returnImmediately": True, "blocking": False}
            return {"message": self.message(), "configuration": self.mutated(config)}
        return self.mutated({"taskId": self.task_id, "url": "https://example.com/h"})

    def body(self, path: str) -> Any:
        if speaks_jsonrpc(path, "POST") and self.rng.random() < 0.9:
            return {
                "jsonrpc": self.rng.choice(["2.0"] * 8 + ["1.0", self.value()]),
                "id": self.rng.choice([1, "a", None, self.text(), [1]]),
                "method": self.rng.choice([*METHODS_1_0, *METHODS_0_3, self.text()]),
                "params": self.params(),
            }
        if self.rng.random() < 0.7:
            return self.params()
        return self.value()

    def request(self) -> tuple[str, str, Any, dict[str, str]]:
        segment = quote(self.text()[:50].encode("utf-8", "surrogatepass"), safe=":")
        template = self.rng.choice(list(PATHS))
        path = template.format(task=self.task_id, text=segment)
        if self.rng.random() < 0.9:
            method = self.rng.choice(PATHS[template])
        else:
            method = self.rng.choice(["GET", "POST", "DELETE", "PUT"])
        if method in ("GET", "DELETE") and self.rng.random() < 0.7:
            params = self.params() if self.rng.random() < 0.8 else {}
            query = params if isinstance(params, dict) else {"id": params}
            path += "?" + "&".join(
                f"{quote(str(k).encode('utf-8', 'surrogatepass'))}="
                f"{quote(str(v).encode('utf-8', 'surrogatepass'))}"
                for k, v in query.items()
            )
        body = self.body(path)
        legacy = isinstance(body, dict) and body.get("method") in METHODS_0_3
        usual = ["", "0.3"] if legacy else ["1.0", ""]
        versions = usual * 8 + ["0.3", "1.0", "99.0", "1" * 300, "x"]
        headers = {"A2A-Version": self.rng.choice(versions)}
        if self.rng.random() < 0.2:
            headers["Content-Type"] = self.rng.choice(["text/plain", "application/a2a+json"])
        return method, path, body, headers


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_a_seeded_fuzz_of_the_face_finds_no_server_error(
    alice: Any, make_task: Callable[..., Task], agent: Any, seed: int, settings: Any
) -> None:
    settings.A2A_BLOCKING_TIMEOUT = 0.01  # a valid blocking send returns at once
    settings.A2A_STREAM_RECHECK = 0.01
    task = make_task(alice)
    task.complete({"verdict": "pass"}, [])  # finished: streams end at once
    fuzzer = Fuzzer(seed, str(task.id))
    client = Client(raise_request_exception=False)
    auth = {"Authorization": f"Bearer {alice.raw_token}"}
    for _ in range(100):
        method, path, body, headers = fuzzer.request()
        content_type = headers.pop("Content-Type", "application/json")
        raw = json.dumps(body).encode()
        if fuzzer.rng.random() < 0.05:
            raw = fuzzer.rng.choice([b"{", b"\xff\xfe", raw[: len(raw) // 2], b"[" * 70])
        response = client.generic(
            method, path, raw, content_type=content_type, headers={**auth, **headers}
        )
        if response.get("Content-Type", "").startswith("text/event-stream"):
            with warnings.catch_warnings():  # (an async stream read synchronously)
                warnings.simplefilter("ignore")
                events = b"".join(response)  # streams end: the task is finished
            assert b"INTERNAL" not in events, (method, path, raw[:300], events[:300])
            continue
        assert response.status_code < 500, (method, path, raw[:300], response.content[:300])
        assert response["Content-Type"] == "application/json", (method, path)
        answer = json.loads(response.content)
        if speaks_jsonrpc(path.split("?")[0], method) and response.status_code == 200:
            assert answer["jsonrpc"] == "2.0", (method, path)
