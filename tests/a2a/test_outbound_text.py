"""What the platform sends an agent is JSON in UTF-8, non-ASCII text as itself (a real
HTTP server on loopback reads the bytes): as ``\\u`` escapes, CJK text took twice its
UTF-8 size and an emoji three times, and an agent's body limit (the JS adapter's 1 MB)
refused an input the platform had taken."""

from __future__ import annotations

import json
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from a2a.transports.jsonrpc import JsonRpcTransport
from a2a.transports.rest import RestTransport
from a2a.wire import user_message
from agent_profiles.interfaces import HTTP_JSON, JSONRPC, CallTarget
from tests.support.serving import threaded

# Neither database nor Redis: once, in either pass.
pytestmark = pytest.mark.no_services

TEXT = "文" * 1000 + " lampe à pied 🛋 ישראל"


class Recorder(BaseHTTPRequestHandler):
    """Keeps each body it is sent; answers with a completed task (in both bindings)."""

    protocol_version = "HTTP/1.1"
    bodies: list[bytes] = []

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        Recorder.bodies.append(body)
        task = {"id": "t1", "contextId": "c1", "status": {"state": "TASK_STATE_COMPLETED"}}
        request = json.loads(body)
        answer: dict[str, Any] = {"task": task}
        if "jsonrpc" in request:
            answer = {"jsonrpc": "2.0", "id": request["id"], "result": answer}
        data = json.dumps(answer).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture(scope="module")
def agent_url() -> Iterator[str]:
    with threaded(ThreadingHTTPServer(("127.0.0.1", 0), Recorder)) as url:
        yield url


@pytest.fixture(autouse=True)
def loopback(settings: Any) -> None:
    settings.ALLOW_LOOPBACK_URLS = True


@pytest.mark.parametrize(
    ("binding", "transport"), [(JSONRPC, JsonRpcTransport), (HTTP_JSON, RestTransport)]
)
def test_a_send_carries_non_ascii_text_as_itself(
    agent_url: str, binding: str, transport: type
) -> None:
    Recorder.bodies.clear()
    target = CallTarget(agent_id="a1", url=agent_url, binding=binding)
    message = user_message(skill_id="ce-review", data={"product": TEXT})
    reply = transport(target).send(message)
    assert reply.task is not None
    (body,) = Recorder.bodies
    assert TEXT.encode() in body  # UTF-8, no \u escape
    assert b"\\u" not in body
    assert len(body) < len(TEXT.encode()) + 500
    sent = json.loads(body)
    parts = (sent.get("params") or sent)["message"]["parts"]
    assert parts == [{"data": {"product": TEXT}}]
