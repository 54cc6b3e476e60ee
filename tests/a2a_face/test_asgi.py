"""The lean ASGI entry of the face: same views, no middleware, its own database threads."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest

from a2a.face.asgi import FaceASGIHandler, is_face_path, may_stream
from a2a.face.db import close_pool
from a2a.models import Task
from tests.support.asgi_calls import body_then_gone, http_scope, recording

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def _close_the_pool() -> Iterator[None]:
    yield
    close_pool()


def _get(path: str, **headers: str) -> httpx.Response:
    async def call() -> httpx.Response:
        transport = httpx.ASGITransport(app=FaceASGIHandler())
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
            return await client.get(path, headers=headers)

    return asyncio.run(call())


@pytest.mark.parametrize(
    ("path", "face"),
    [
        ("/v1/a2a/tasks", True),
        ("/v1/a2a", True),
        ("/.well-known/agent-card.json", True),
        ("/v1/a2aa", False),
        ("/api/tasks", False),
        ("/admin/", False),
    ],
)
def test_it_recognises_the_face_paths(path: str, face: bool) -> None:
    assert is_face_path(path) is face


def test_it_serves_a_task_from_its_database_threads(
    settings: Any, alice: Any, make_task: Callable[..., Task]
) -> None:
    settings.A2A_FACE_DB_THREADS = 2
    task = make_task(alice)
    response = _get(
        f"/v1/a2a/tasks/{task.id}",
        Authorization=f"Bearer {alice.raw_token}",
        **{"A2A-Version": "1.0"},
    )
    assert response.status_code == 200
    assert response.json()["id"] == str(task.id)
    assert response.headers["X-Content-Type-Options"] == "nosniff"


def test_it_answers_unknown_paths_with_json(db: None) -> None:
    response = _get("/v1/a2a/no/such/thing")
    assert response.status_code == 404
    assert response.json()["error"]["details"][0]["reason"] == "METHOD_NOT_FOUND"


def test_it_checks_allowed_hosts(settings: Any) -> None:
    settings.ALLOWED_HOSTS = ["platform.example"]
    response = _get("/v1/a2a/tasks")
    assert response.status_code == 400
    assert response.json()["error"]["details"][0]["reason"] == "INVALID_REQUEST"


def _raw_call(
    path: str, query: bytes = b"", host: bytes = b"127.0.0.1", method: str = ""
) -> tuple[int, Any]:
    """One request straight through the ASGI interface (bytes no HTTP client would send)."""
    method = method or ("POST" if "jsonrpc" in path else "GET")
    headers = [(b"content-type", b"application/json")]
    scope = http_scope(path, method=method, headers=headers, query=query, host=host)
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"{}", "more_body": False}

    asyncio.run(FaceASGIHandler()(scope, receive, recording(sent)))
    start = next(m for m in sent if m["type"] == "http.response.start")
    body = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
    headers = dict(start["headers"])
    assert headers[b"Content-Type"] == b"application/json"
    return start["status"], json.loads(body)


def test_a_query_string_that_is_not_utf8_is_a_json_400(db: None) -> None:
    status, body = _raw_call("/v1/a2a/tasks", query=b"contextId=\xff\xfe")
    assert status == 400
    assert body["error"]["details"][0]["reason"] == "INVALID_REQUEST"
    status, body = _raw_call("/v1/a2a/jsonrpc", query=b"x=\xff")
    assert (status, body["error"]["code"]) == (200, -32600)


def test_a_bad_host_on_the_jsonrpc_url_is_a_jsonrpc_envelope(settings: Any) -> None:
    settings.ALLOWED_HOSTS = ["platform.example"]
    status, body = _raw_call("/v1/a2a/jsonrpc/")
    assert status == 200
    assert set(body) == {"jsonrpc", "id", "error"}
    assert body["error"]["code"] == -32600
    # A POST to the interface's own URL is a JSON-RPC call too; a GET there is not.
    for path in ("/v1/a2a", "/v1/a2a/agent-x/"):
        status, body = _raw_call(path, method="POST")
        assert (status, set(body)) == (200, {"jsonrpc", "id", "error"}), path
    status, body = _raw_call("/v1/a2a", method="GET")
    assert status == 400
    assert body["error"]["details"][0]["reason"] == "INVALID_REQUEST"
    status, body = _raw_call("/v1/a2a/tasks", method="POST")  # the face's own word
    assert body["error"]["details"][0]["reason"] == "INVALID_REQUEST"


@pytest.mark.parametrize(
    ("path", "streams"),
    [
        ("/v1/a2a/message:stream", True),
        ("/v1/a2a/agent-x/message:stream", True),
        ("/v1/a2a/tasks/t1:subscribe", True),
        ("/v1/a2a/jsonrpc", True),  # the method (maybe a stream) is in the body
        ("/v1/a2a/agent-x/jsonrpc/", True),
        ("/v1/a2a/message:send", False),
        ("/v1/a2a/tasks/t1", False),
        ("/v1/a2a/tasks/t1:cancel", False),
        ("/.well-known/agent-card.json", False),
    ],
)
def test_only_answers_that_can_stream_watch_for_the_client_going_away(
    path: str, streams: bool
) -> None:
    assert may_stream(path) is streams


def _rpc(method: Any, **params: Any) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}).encode()


@pytest.mark.parametrize(
    ("body", "streams"),
    [
        (_rpc("SendStreamingMessage"), True),
        (_rpc("SubscribeToTask", id="t1"), True),
        (_rpc("message/stream"), True),  # A2A 0.3
        (_rpc("tasks/resubscribe", id="t1"), True),
        (_rpc("SendMessage"), False),
        (_rpc("GetTask", id="t1"), False),
        (_rpc("message/send"), False),
        (_rpc("NoSuchMethod"), False),  # answered with an error at once
        (rb'{"jsonrpc": "2.0", "id": 1, "method": "SendStreaming\u004dessage"}', True),
        (b"not json", True),  # the view says what is wrong; the watch stays
        (b"[" * 100_000, True),
        (_rpc(7), True),
        (_rpc("SendMessage", text="x" * 20_000), True),  # too large to read twice
        (b"[]", True),
    ],
)
def test_a_json_rpc_call_is_watched_when_its_method_streams(body: bytes, streams: bool) -> None:
    assert may_stream("/v1/a2a/jsonrpc", body) is streams
    assert may_stream("/v1/a2a/agent-x/jsonrpc/", body) is streams
    assert may_stream("/v1/a2a", body, rpc=True) is streams


def _scope(path: str, method: str, token: str, body: bytes) -> dict[str, Any]:
    headers = [
        (b"authorization", f"Bearer {token}".encode()),
        (b"a2a-version", b"1.0"),
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
    ]
    return http_scope(path, method=method, headers=headers)


def _leave_once_streaming(scope: dict[str, Any], body: bytes) -> list[dict[str, Any]]:
    """Run the face for ``scope``: the client sends ``body``, waits for the first chunk
    of the answer, then goes away. Fails when the handler goes on (a stream that only the
    client's going away can end); returns what was sent."""
    sent: list[dict[str, Any]] = []

    async def run() -> None:
        streaming = asyncio.Event()
        asked = 0

        async def receive() -> dict[str, Any]:
            nonlocal asked
            asked += 1
            if asked == 1:
                return {"type": "http.request", "body": body, "more_body": False}
            await streaming.wait()  # the client leaves once the stream has begun
            return {"type": "http.disconnect"}

        async def send(message: dict[str, Any]) -> None:
            sent.append(message)
            if message["type"] == "http.response.body" and message.get("body"):
                streaming.set()

        handler = asyncio.create_task(FaceASGIHandler()(scope, receive, send))
        await streaming.wait()
        done, _ = await asyncio.wait([handler], timeout=15)
        handler.cancel()
        assert done, "the stream went on after its client had gone"

    asyncio.run(run())
    return sent


def test_a_stream_ends_when_its_client_goes_away(
    alice: Any, make_task: Callable[..., Task]
) -> None:
    task = make_task(alice)  # not final: its subscription would stream until it ends
    scope = _scope(f"/v1/a2a/tasks/{task.id}:subscribe", "GET", alice.raw_token, b"")
    sent = _leave_once_streaming(scope, b"")
    assert sent[0]["status"] == 200
    assert any(m.get("body") for m in sent[1:])


def test_a_json_rpc_stream_ends_when_its_client_goes_away(
    alice: Any, make_task: Callable[..., Task]
) -> None:
    task = make_task(alice)  # not final: its subscription would stream until it ends
    body = _rpc("SubscribeToTask", id=str(task.id))
    sent = _leave_once_streaming(_scope("/v1/a2a/jsonrpc", "POST", alice.raw_token, body), body)
    assert sent[0]["status"] == 200


@pytest.mark.parametrize("binding", ["rest", "jsonrpc"])
def test_a_send_whose_client_went_away_still_creates_its_task_once(
    binding: str, alice: Any, skill: Any, agent: Any
) -> None:
    """No watch for a send (it cannot stream): the task is created and answered once."""
    message = {
        "messageId": f"m-gone-{binding}",
        "role": "ROLE_USER",
        "parts": [{"data": {"product": "lamp"}}],
        "metadata": {"skillId": skill.id},
    }
    params = {"message": message, "configuration": {"returnImmediately": True}}
    if binding == "rest":
        path, body = "/v1/a2a/message:send", json.dumps(params).encode()
    else:
        path, body = "/v1/a2a/jsonrpc", _rpc("SendMessage", **params)
    sent: list[dict[str, Any]] = []
    asyncio.run(
        FaceASGIHandler()(
            _scope(path, "POST", alice.raw_token, body), body_then_gone(body), recording(sent)
        )
    )
    assert Task.objects.filter(created_by=alice).count() == 1
    assert sent[0]["status"] == 200
