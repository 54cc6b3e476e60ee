"""Reading agents' streams and whole answers within ``AGENT_ANSWER_MAX_BYTES``: server-sent
events split however the bytes arrive, and an event, a line without an end, or a body
over the cap refused before it is held whole."""

from __future__ import annotations

from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import httpx
import pytest

from a2a.exceptions import A2AProtocolError, A2ATransientError
from a2a.transports import answers, http
from a2a.transports.answers import StreamOverdue, iter_sse, read_capped
from a2a.transports.rest import RestTransport
from agent_profiles.guarded_pool import AnswerTooLarge
from agent_profiles.interfaces import CallTarget
from tests.support.recorder import Recording, recording_server


def stream(*chunks: bytes, headers: dict[str, str] | None = None) -> httpx.Response:
    """An open response whose body arrives in exactly these chunks."""
    return httpx.Response(200, headers=headers, content=iter(chunks))


def split_everywhere(raw: bytes) -> Iterator[tuple[bytes, ...]]:
    yield (raw,)
    yield tuple(raw[i : i + 1] for i in range(len(raw)))
    for cut in range(1, len(raw)):
        yield (raw[:cut], raw[cut:])


EVENTS = (
    b": a comment\r\n"
    b'data: {"a": 1}\r\n\r\n'
    b"event: status\n"
    b"data: line one\n"
    b"data:line two\n\n"
    b"data: cr only\r\r"
    b"id: 7\r\n"
    b"data: last, no blank line"
)


def test_events_are_the_same_however_the_bytes_are_split() -> None:
    """The last event, which the stream ends without its blank line, is discarded (the
    SSE rule: a stream cut in the middle of an event is a stream that ended)."""
    expected = ['{"a": 1}', "line one\nline two", "cr only"]
    for chunks in split_everywhere(EVENTS):
        assert list(iter_sse(stream(*chunks), limit=1000)) == expected, chunks


def test_a_stream_that_ends_on_a_cr_only_blank_line_keeps_its_last_event() -> None:
    """CR-only line ends (the SSE spec allows them): the CR kept back for a LF that might
    follow ends its line when the stream ends; it was the last event's blank line."""
    for chunks in split_everywhere(b'data: {"a": 1}\r\rdata: last\r\r'):
        assert list(iter_sse(stream(*chunks), limit=1000)) == ['{"a": 1}', "last"], chunks


def test_utf8_split_inside_a_character_is_whole_again() -> None:
    raw = "data: café ☕\n\n".encode()
    for chunks in split_everywhere(raw):
        assert list(iter_sse(stream(*chunks), limit=1000)) == ["café ☕"]


def test_an_event_over_the_cap_is_refused() -> None:
    lines = b"".join(b"data: " + b"x" * 90 + b"\n" for _ in range(20))  # ~1,820 bytes
    with pytest.raises(AnswerTooLarge):
        list(iter_sse(stream(lines + b"\n"), limit=1000))
    # The same bytes as small events pass: the cap is per event.
    small = lines.replace(b"\n", b"\n\n")
    assert len(list(iter_sse(stream(small), limit=1000))) == 20


def test_a_line_that_never_ends_is_refused_before_it_is_held() -> None:
    held: list[int] = []

    def endless() -> Iterator[bytes]:
        yield b"data: "
        for sent in range(1, 10_000):
            held.append(sent)
            yield b"y" * 100

    with pytest.raises(AnswerTooLarge):
        list(iter_sse(httpx.Response(200, content=endless()), limit=1000))
    assert len(held) < 20  # stopped reading soon after the cap, not at the stream's end


def test_a_stream_ends_at_until_or_its_deadline_once_it_gave_an_event_else_fails(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Both moments are checked at every line, comments included: an agent that only
    keeps its stream alive holds no worker past them."""
    clock = iter(range(1000))
    # The module's own clock only: patching time.monotonic itself would hand this
    # clock's ticks to every other thread of the process (and flake).
    monkeypatch.setattr(answers, "time", SimpleNamespace(monotonic=lambda: next(clock)))

    def alive(first: bytes = b"") -> Iterator[bytes]:
        yield first
        while True:
            yield b": keep-alive\n\n"

    event = b'data: {"a": 1}\n\n'
    given = list(iter_sse(httpx.Response(200, content=alive(event)), until=5, deadline=50))
    assert given == ['{"a": 1}']  # then it ended, quietly, at the first line after 5
    given = list(iter_sse(httpx.Response(200, content=alive(event)), deadline=50))
    assert given == ['{"a": 1}']  # at the deadline, a stream that gave an event ends
    with pytest.raises(StreamOverdue):  # no event: "until" does not end it, the deadline does
        list(iter_sse(httpx.Response(200, content=alive()), until=5, deadline=50))


def test_a_line_trickled_without_its_end_is_overdue_at_the_deadline(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The clock is checked at every chunk, not only at every line: an agent that sends a
    byte at a time and never ends the line held the stream's thread for as long as it
    liked (a comment colon, then one byte a second, in the outbound hunt)."""
    clock = iter(range(1000))
    # The module's own clock only: patching time.monotonic itself would hand this
    # clock's ticks to every other thread of the process (and flake).
    monkeypatch.setattr(answers, "time", SimpleNamespace(monotonic=lambda: next(clock)))
    sent: list[int] = []

    def trickle(first: bytes = b"") -> Iterator[bytes]:
        yield first
        for n in range(900):
            sent.append(n)
            yield b"x"

    with pytest.raises(StreamOverdue):
        list(iter_sse(httpx.Response(200, content=trickle()), deadline=50, limit=10_000))
    assert len(sent) < 60  # stopped at the deadline, not at the stream's end
    clock = iter(range(1000))  # afresh
    given = iter_sse(httpx.Response(200, content=trickle(b'data: {"a": 1}\n\n: ')), deadline=50)
    assert list(given) == ['{"a": 1}']  # a stream that gave its event ends there


def test_a_whole_body_is_read_up_to_the_cap() -> None:
    assert read_capped(stream(b"a" * 600, b"b" * 400), limit=1000) == b"a" * 600 + b"b" * 400
    with pytest.raises(AnswerTooLarge):
        read_capped(stream(b"a" * 600, b"b" * 401), limit=1000)
    declared = stream(b"tiny", headers={"Content-Length": "5000"})
    with pytest.raises(AnswerTooLarge):  # refused on its declared length, unread
        read_capped(declared, limit=1000)


# --- wired into the calls: the task's error, not a crash ------------------------------------


@pytest.fixture
def server(settings: Any) -> Iterator[Recording]:
    settings.ALLOW_LOOPBACK_URLS = True
    settings.AGENT_ANSWER_MAX_BYTES = 70_000
    with recording_server() as recording:
        yield recording


def test_a_stream_over_the_cap_is_answer_too_large(server: Recording) -> None:
    """300 kB without a line end, read as a stream against a 70 kB cap."""
    target = CallTarget(agent_id="peer", url=f"http://127.0.0.1:{server.port}")
    url = f"{target.url}/chunked"
    stream = http.open_stream(target, "POST", url, {}, operation="stream", timeout=5)
    with pytest.raises(A2AProtocolError) as refused, stream as response:
        list(iter_sse(response))
    assert refused.value.code == "answer_too_large"
    assert refused.value.details == {"maxBytes": 70_000}


def test_a_stream_kept_alive_past_its_time_is_a_transient_error(server: Recording) -> None:
    """Comments every 50 ms keep the read timeout from firing; the stream's whole time
    (``total``, here its timeout) ends it with an error the worker retries."""
    target = CallTarget(agent_id="peer", url=f"http://127.0.0.1:{server.port}/keepalive")
    events = RestTransport(target).stream({"parts": []}, timeout=5, total=0.5)
    with pytest.raises(A2ATransientError, match="kept its stream open") as overdue:
        list(events)
    assert overdue.value.code == "agent_timeout"


@pytest.mark.parametrize("path", ["/big", "/chunked"])
def test_a_plain_call_over_the_cap_is_answer_too_large(server: Recording, path: str) -> None:
    target = CallTarget(agent_id="peer", url=f"http://127.0.0.1:{server.port}")
    with pytest.raises(A2AProtocolError, match="more than 70000 bytes") as refused:
        http.call(target, "POST", f"{target.url}{path}", {}, operation="send")
    assert refused.value.code == "answer_too_large"
