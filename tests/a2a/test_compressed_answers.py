"""Compressed answers from agents and token endpoints (a real HTTP server on loopback).

A gzip bomb (20 MB of zeros, 20 kB on the wire) answered to a stream (HTTP+JSON and
JSON-RPC, events or a whole JSON or error body instead), a plain call or a token fetch is
``answer_too_large`` (a token: an auth error) while it expands: httpx once expanded a
whole raw chunk at once, 20 MB, before the cap saw a byte. Gzip and deflate answers are
read as any other; a broken one is a clear error, not a crash; compressed bytes that
decode to nothing hold no stream past its deadline.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import pytest

from a2a.exceptions import A2AAuthError, A2AProtocolError, A2ATransientError
from a2a.states import TaskState
from a2a.transports import credentials
from a2a.transports.jsonrpc import JsonRpcTransport
from a2a.transports.rest import RestTransport
from a2a.wire import user_message
from agent_profiles.interfaces import JSONRPC, CallTarget
from tests.support.encoded import Answer, encoded, encoded_server, gzip_bomb, peak_memory
from tests.support.trickle import trickling_server

CAP = 70_000
TASK = {"id": "r1", "contextId": "c1", "status": {"state": "TASK_STATE_COMPLETED"}}
JSON = "application/json"
SSE = "text/event-stream"


def bomb(status: int, content_type: str) -> Answer:
    return status, {"Content-Type": content_type, "Content-Encoding": "gzip"}, gzip_bomb()


def rpc(coding: str, *, sse: bool) -> Any:
    """A JSON-RPC agent answering ``{"task": TASK}`` for the request's id, compressed."""

    def answer(request: Any) -> Answer:
        body = json.dumps({"jsonrpc": "2.0", "id": request["id"], "result": {"task": TASK}})
        if sse:
            return encoded(coding, f"data: {body}\n\n".encode(), SSE)
        return encoded(coding, body.encode())

    return answer


ROUTES = {
    "/bomb/message:send": bomb(200, JSON),
    "/bomb/message:stream": bomb(200, SSE),
    "/bomb-error/message:stream": bomb(500, JSON),
    "/rpc-bomb-events": bomb(200, SSE),
    "/rpc-bomb-json": bomb(200, JSON),
    "/token-bomb": bomb(200, JSON),
    "/garbled/message:stream": (
        200,
        {"Content-Type": SSE, "Content-Encoding": "gzip"},
        b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff" + b"\xff" * 40,  # a bad block type
    ),
    **{
        f"/{coding}/{path}": encoded(coding, body, ctype)
        for coding in ("gzip", "deflate", "raw-deflate")
        for path, body, ctype in [
            ("message:send", json.dumps({"task": TASK}).encode(), JSON),
            ("message:stream", f"data: {json.dumps({'task': TASK})}\n\n".encode(), SSE),
            ("token", b'{"access_token": "tok-1", "token_type": "Bearer"}', JSON),
        ]
    },
    **{f"/rpc-{c}": rpc(c, sse=False) for c in ("gzip", "deflate", "raw-deflate")},
    **{f"/rpc-{c}-events": rpc(c, sse=True) for c in ("gzip", "deflate", "raw-deflate")},
}


@pytest.fixture(scope="module")
def agent() -> Iterator[str]:
    gzip_bomb()  # made before any test measures its memory
    with encoded_server(ROUTES) as url:
        yield url


@pytest.fixture(autouse=True)
def capped(settings: Any) -> None:
    settings.ALLOW_LOOPBACK_URLS = True
    settings.AGENT_ANSWER_MAX_BYTES = CAP
    credentials.forget_tokens()


def message() -> dict[str, Any]:
    return user_message(skill_id="ce-review", data={"product": "x"})


def rest(url: str, **target: Any) -> RestTransport:
    return RestTransport(CallTarget(agent_id="peer", url=url, **target))


def json_rpc(url: str) -> JsonRpcTransport:
    return JsonRpcTransport(CallTarget(agent_id="peer", url=url, binding=JSONRPC))


# --- gzip bombs -------------------------------------------------------------------------


BOMBS = {
    "rest-stream": lambda url: list(rest(f"{url}/bomb").stream(message(), timeout=5)),
    "rest-stream-error-body": lambda url: list(
        rest(f"{url}/bomb-error").stream(message(), timeout=5)
    ),
    "jsonrpc-stream": lambda url: list(
        json_rpc(f"{url}/rpc-bomb-events").stream(message(), timeout=5)
    ),
    "jsonrpc-stream-json-body": lambda url: list(
        json_rpc(f"{url}/rpc-bomb-json").stream(message(), timeout=5)
    ),
    # Plain calls go over urllib3, whose read(amt) bounds each step itself: kept so.
    "rest-send": lambda url: rest(f"{url}/bomb").send(message()),
    "jsonrpc-send": lambda url: json_rpc(f"{url}/rpc-bomb-json").send(message()),
}


@pytest.mark.parametrize("call", BOMBS)
def test_a_gzip_bomb_answer_is_too_large_before_it_expands(agent: str, call: str) -> None:
    with peak_memory() as peak, pytest.raises(A2AProtocolError) as refused:
        BOMBS[call](agent)
    assert refused.value.code == "answer_too_large"
    assert refused.value.details == {"maxBytes": CAP}
    assert peak[0] < 5_000_000, peak  # the cap and a step or two, not 20 MB


def test_a_gzip_bomb_token_is_refused_before_it_expands(agent: str) -> None:
    auth = {"type": "oauth2", "tokenUrl": f"{agent}/token-bomb", "clientId": "c"}
    target = CallTarget(agent_id="peer", url=agent, auth={**auth, "clientSecret": "s"})
    with peak_memory() as peak, pytest.raises(A2AAuthError, match="more than 64000 bytes"):
        credentials.oauth2_token(target)
    assert peak[0] < 5_000_000, peak


# --- compressed answers that are fine ---------------------------------------------------


@pytest.mark.parametrize("coding", ["gzip", "deflate", "raw-deflate"])
def test_compressed_answers_are_read_as_any_other(agent: str, coding: str) -> None:
    for reply in [
        rest(f"{agent}/{coding}").send(message()),
        *rest(f"{agent}/{coding}").stream(message(), timeout=5),
        json_rpc(f"{agent}/rpc-{coding}").send(message()),
        *json_rpc(f"{agent}/rpc-{coding}-events").stream(message(), timeout=5),
    ]:
        assert reply.task is not None
        assert reply.task["id"] == "r1"
        assert reply.state == TaskState.COMPLETED


@pytest.mark.parametrize("coding", ["gzip", "deflate", "raw-deflate"])
def test_a_compressed_token_is_read(agent: str, coding: str) -> None:
    auth = {"type": "oauth2", "tokenUrl": f"{agent}/{coding}/token", "clientId": "c"}
    target = CallTarget(agent_id="peer", url=agent, auth={**auth, "clientSecret": "s"})
    assert credentials.oauth2_token(target) == "tok-1"


# --- broken or endless ------------------------------------------------------------------


def test_a_stream_whose_gzip_is_broken_is_a_protocol_error(agent: str) -> None:
    with pytest.raises(A2AProtocolError, match="gzip encoding is broken") as refused:
        list(rest(f"{agent}/garbled").stream(message(), timeout=5))
    assert refused.value.code == "not_a2a"


def test_compressed_bytes_that_decode_to_nothing_hold_no_stream_past_its_deadline() -> None:
    """A gzip header whose comment never ends, a byte every 20 ms: nothing decodes, so no
    line ever comes; the stream still ends at its time (0.5 s), not at the agent's."""
    head = (
        f"HTTP/1.1 200 OK\r\nContent-Type: {SSE}\r\nContent-Encoding: gzip\r\n\r\n".encode()
        + b"\x1f\x8b\x08\x10\x00\x00\x00\x00\x00\xff"  # FCOMMENT set: a comment follows
    )
    with trickling_server(head, b"x") as peer:
        started = time.monotonic()
        events = rest(f"http://127.0.0.1:{peer.port}").stream(message(), timeout=5, total=0.5)
        with pytest.raises(A2ATransientError, match="kept its stream open") as overdue:
            list(events)
    assert overdue.value.code == "agent_timeout"
    assert time.monotonic() - started < 3
