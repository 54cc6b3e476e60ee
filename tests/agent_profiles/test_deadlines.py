"""Whole-answer deadlines over httpx (agent_profiles/deadlines.py): a peer that answers a
byte at a time, each within the read timeout, is cut off at the call's deadline."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from agent_profiles import deadlines
from agent_profiles.deadlines import whole_answer_by
from agent_profiles.guarded_http import guarded_client
from tests.support.recorder import recording_server
from tests.support.trickle import trickling_server


@pytest.fixture(autouse=True)
def loopback(settings: Any) -> None:
    settings.ALLOW_LOOPBACK_URLS = True


@pytest.mark.parametrize(
    ("head", "drip"),
    [
        (b"", b"HTTP/1.1 200 OK\r\n"),  # the status line
        (b"HTTP/1.1 200 OK\r\nX-Slow: ", b"a"),  # the headers
    ],
    ids=["status-line", "headers"],
)
def test_an_answer_trickled_before_its_headers_end_stops_at_the_deadline(
    head: bytes, drip: bytes
) -> None:
    with trickling_server(head, drip) as peer:
        with (
            guarded_client(timeout=1.0) as client,
            whole_answer_by(0.5),
            pytest.raises(httpx.ReadTimeout, match="deadline"),
        ):
            client.get(f"http://127.0.0.1:{peer.port}/")
        assert peer.hung_up.wait(5)  # the connection was closed, the peer still sending


def test_a_body_read_inside_the_deadline_stops_there() -> None:
    head = b"HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n\r\n"
    with trickling_server(head, b"x") as peer, guarded_client(timeout=1.0) as client:
        with (
            whole_answer_by(0.5),
            client.stream("GET", f"http://127.0.0.1:{peer.port}/") as response,
            pytest.raises(httpx.ReadTimeout),
        ):
            response.read()
        assert peer.hung_up.wait(5)


def test_an_inner_deadline_never_pushes_an_outer_one_out() -> None:
    with whole_answer_by(0.5) as outer:
        with whole_answer_by(60) as later:
            assert later > outer  # what it asked for...
            assert deadlines._deadline.get() == outer  # ...but the nearer one holds
        with whole_answer_by(0.1) as sooner:
            assert sooner < outer
            assert deadlines._deadline.get() == sooner  # a nearer one is brought in
        assert deadlines._deadline.get() == outer
    assert deadlines._deadline.get() is None


def test_a_connection_made_under_a_deadline_serves_later_calls_without_it() -> None:
    """The deadline is the call's, not the connection's: once it passed, the pooled
    connection still serves a call made outside any deadline."""
    import time

    with recording_server() as server, guarded_client(timeout=2.0) as client:
        url = f"http://127.0.0.1:{server.port}/ok"
        # A deadline a loaded machine still meets (a call that overran it would close the
        # connection, and the second call would open another for the wrong reason).
        with whole_answer_by(1.0):
            assert client.post(url).status_code == 200
        time.sleep(1.1)  # past that deadline
        assert client.post(url).status_code == 200
        assert len(set(server.ports)) == 1  # the same connection
