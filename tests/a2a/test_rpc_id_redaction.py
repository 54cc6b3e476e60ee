"""A JSON-RPC agent that echoes the call's credential in the answer's ``id`` (a real HTTP
server on loopback): the "answered for another request" error quotes the id, and no piece
of the secret is left in it, wherever the quote is cut. The id was cut at 60 characters
without a mark, and the redaction, which takes whole secrets (and a secret's start before
an excerpt's ``…``), left the start of one cut there."""

from __future__ import annotations

import json
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from a2a.exceptions import A2AProtocolError
from a2a.transports.jsonrpc import JsonRpcTransport
from a2a.wire import user_message
from agent_profiles.interfaces import JSONRPC, CallTarget
from tests.a2a.test_secret_echoes import agent_with, run, stored
from tests.support.serving import threaded

SECRET = "SUPERSECRET-RPC-ID-TOKEN-0123456789abcdef"


class EchoInId(BaseHTTPRequestHandler):
    """``/{result|error|object}/{pad}``: a JSON-RPC answer whose id is ``pad`` x's then
    the bearer token the request carried (``object``: that string inside an object), with
    a result, or an error."""

    protocol_version = "HTTP/1.1"

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        mode, pad = self.path.strip("/").split("/")[:2]
        token = self.headers.get("Authorization", "").removeprefix("Bearer ")
        echoed: Any = "x" * int(pad) + token
        answer: dict[str, Any] = {"jsonrpc": "2.0", "result": {"task": {}}}
        if mode == "object":
            echoed = {"echo": echoed}
        if mode == "error":
            answer = {"jsonrpc": "2.0", "error": {"code": -32600, "message": "no"}}
        data = json.dumps({**answer, "id": echoed}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture(scope="module")
def echo() -> Iterator[str]:
    with threaded(ThreadingHTTPServer(("127.0.0.1", 0), EchoInId)) as url:
        yield url


@pytest.fixture(autouse=True)
def loopback(settings: Any) -> None:
    settings.ALLOW_LOOPBACK_URLS = True
    settings.A2A_RETRY_BACKOFF = 0.0


def pieces(secret: str, size: int = 8) -> list[str]:
    return [secret[at : at + size] for at in range(len(secret) - size + 1)]


def assert_no_piece(text: str) -> None:
    leaked = [piece for piece in pieces(SECRET) if piece in text]
    assert not leaked, text


# Where the secret starts in the id: whole within the quote; cut by the old 60-character
# cut (10 characters left); cut by the excerpt's (10, 4 and 3 left).
PADS = [0, 50, 190, 196, 197]


@pytest.mark.parametrize("mode", ["result", "error", "object"])
@pytest.mark.parametrize("pad", PADS)
def test_a_secret_echoed_in_the_id_is_not_quoted_in_part(echo: str, mode: str, pad: int) -> None:
    auth = {"type": "bearer", "token": SECRET}
    target = CallTarget(agent_id="peer", url=f"{echo}/{mode}/{pad}", binding=JSONRPC, auth=auth)
    message = user_message(skill_id="ce-review", data={"product": "x"})
    with pytest.raises(A2AProtocolError, match="another request") as refused:
        JsonRpcTransport(target).send(message)
    assert "x" * min(pad, 20) in refused.value.message  # the id was quoted
    assert_no_piece(str(refused.value) + json.dumps(refused.value.details))


@pytest.mark.django_db
def test_the_tasks_error_keeps_no_piece_of_the_secret(
    echo: str, make_agent: Any, skill: Any, user: Any, caplog: Any
) -> None:
    auth = {"type": "bearer", "token": SECRET}
    agent_with(make_agent, skill, f"{echo}/result/50", auth, protocol_binding="JSONRPC")
    task = run(user)
    assert task.error is not None
    assert "another request" in task.error["message"]
    assert_no_piece(stored(task) + caplog.text)
