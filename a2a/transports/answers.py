"""Reading agents' answers: whole bodies and server-sent events within
``AGENT_ANSWER_MAX_BYTES``, JSON with bounded depth, and what an error body says.

Every binding reads its answers here. A body is never held past the cap: an answer that
declares or sends more raises :class:`~agent_profiles.guarded_pool.AnswerTooLarge`, which
:func:`too_large` turns into the task's ``answer_too_large`` error. A compressed body
counts as it expands, decoded a bounded step at a time (:mod:`agent_profiles.bodies`; a
body that is not what its ``Content-Encoding`` says is an ``httpx.DecodingError``, as it
was when httpx decoded it).
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Iterator
from typing import Any, NamedTuple

import httpx
from django.conf import settings

from a2a.exceptions import A2ACallError, A2AProtocolError
from a2a.transports.quoting import excerpt
from agent_profiles.bodies import iter_decoded
from agent_profiles.guarded_pool import AnswerTooLarge, PlainResponse
from agent_profiles.interfaces import CallTarget
from platform_site.text import loads_bounded

log = logging.getLogger(__name__)

# A whole answer (urllib3's, for plain calls) or an open stream (httpx's).
Response = PlainResponse | httpx.Response


def too_large(target: CallTarget, method: str, url: str, limit: int) -> A2AProtocolError:
    """The error for an answer (or one stream event) over ``AGENT_ANSWER_MAX_BYTES``."""
    return A2AProtocolError(
        f"Agent '{target.agent_id}' answered {method} {url} with more than {limit} bytes "
        "(AGENT_ANSWER_MAX_BYTES); the rest was not read.",
        {"maxBytes": limit},
        code="answer_too_large",
    )


def read_capped(response: httpx.Response, limit: int | None = None) -> bytes:
    """An open httpx response's whole body, at most ``limit`` (``AGENT_ANSWER_MAX_BYTES``)
    bytes of it held: more raises :class:`AnswerTooLarge`."""
    limit = settings.AGENT_ANSWER_MAX_BYTES if limit is None else limit
    declared = response.headers.get("Content-Length", "")
    if declared.isdigit() and int(declared) > limit:
        raise AnswerTooLarge(limit)
    chunks: list[bytes] = []
    size = 0
    for chunk in iter_decoded(response):
        size += len(chunk)
        if size > limit:
            raise AnswerTooLarge(limit)
        chunks.append(chunk)
    return b"".join(chunks)


def read_whole(response: httpx.Response) -> PlainResponse:
    """An open stream's response read whole (an error, or JSON instead of events)."""
    return PlainResponse(response.status_code, response.headers, read_capped(response))


_LINE_END = re.compile(rb"\r\n|\r|\n")
_BOM = b"\xef\xbb\xbf"  # U+FEFF in UTF-8


def _without_bom(pieces: Iterator[bytes]) -> Iterator[bytes]:
    """``pieces`` without one UTF-8 byte order mark at the start of the stream, which the
    SSE spec says to ignore: kept, it made the first field ``\\ufeffdata`` and the first
    event was lost (the task failed ``not_a2a``). The mark may come split over pieces;
    one piece (maybe empty) is still given for every piece received, for the clock."""
    head = b""
    for piece in pieces:
        head += piece
        if len(head) >= len(_BOM) or not _BOM.startswith(head):
            yield head.removeprefix(_BOM)
            break
        yield b""  # maybe the start of a mark: held until it is told
    yield from pieces


def _lines(response: httpx.Response, limit: int) -> Iterator[bytes | None]:
    """The ended lines of a stream (CRLF, LF or CR ends one); a line longer than ``limit``
    raises :class:`AnswerTooLarge` before it is held whole. ``None`` after a chunk that
    ended no line: the reader's clock is checked on every chunk, so a line trickled a byte
    at a time without its end cannot hold the stream past its deadline (nor compressed
    bytes that decode to nothing: :func:`~agent_profiles.bodies.iter_decoded` gives a
    piece, maybe empty, for every chunk received).

    Each chunk is searched once, and an unfinished line only grows (a bytearray appends
    in place): copying and searching the whole unfinished line again at every chunk (as
    this did) cost an agent trickling a 10 MB line half a minute of CPU. Pieces kept in a
    list instead would hold tens of bytes of overhead for each byte trickled."""
    unfinished = bytearray()
    after_cr = False  # the last chunk ended with a CR: a LF first in the next is its pair
    for chunk in _without_bom(iter_decoded(response)):
        if after_cr and chunk:
            after_cr = False
            if chunk.startswith(b"\n"):  # a CRLF split over two chunks: one line end
                chunk = chunk[1:]
        ended = False
        at = 0
        for end in _LINE_END.finditer(chunk):
            line = chunk[at : end.start()]
            if unfinished:
                unfinished += line
                line, unfinished = bytes(unfinished), bytearray()
            yield line
            ended = True
            at = end.end()
        # A CR ends its line at once (CR-only line ends, as the SSE spec allows: often the
        # final event's blank line), whether a LF follows in the next chunk or not.
        if chunk:  # an empty piece (bytes that decoded to nothing) changes nothing
            after_cr = chunk.endswith(b"\r")
        if at < len(chunk):
            unfinished += chunk[at:]
            if len(unfinished) > limit:
                raise AnswerTooLarge(limit)
        if not ended:
            yield None
    # A line the stream ended without ending is dropped: it can only belong to an event
    # that never got its blank line (which the reader discards anyway).


class AgentErrorEvent(A2ACallError):
    """An error event on a stream that had named its task: the agent's last word on that
    task (a2a-sdk sends one when its executor raises), not a break to follow again. It
    carries the agent's error as the binding maps it (its code, message and status).
    Raised by the bindings' stream readers; :mod:`a2a.agent_streams` fails the task with
    it. An error before any event is the answer to the call itself, raised as it is."""

    def __init__(self, error: A2ACallError) -> None:
        super().__init__(error.message, error.details, code=error.code, status=error.status)
        self.error = error


class StreamOverdue(Exception):
    """A stream still open at its deadline without an event: an agent that only keeps it
    alive (with comments, say) holds no worker past its time."""


class SseEvent(NamedTuple):
    """One server-sent event: its ``event`` name (``""`` when it has none) and its data."""

    name: str
    data: str


def iter_events(
    response: httpx.Response,
    limit: int | None = None,
    *,
    until: float | None = None,
    deadline: float | None = None,
) -> Iterator[SseEvent]:
    """The server-sent events of a stream: the ``event`` name (an agent's ``error``
    event is its error, not a StreamResponse) and the ``data`` (multi-line data joined
    with newlines).

    An event is dispatched at its blank line only: as the SSE spec says, one the stream
    ends without is discarded (a stream cut in the middle of an event is a stream that
    ended, not an event that is not JSON). Lines are split here, not by httpx, so that no
    event (or endless line) held in memory grows past ``limit``
    (``AGENT_ANSWER_MAX_BYTES``): :class:`AnswerTooLarge` instead. One byte order mark
    at the start of the stream is ignored, as the spec says.
    ``until`` and ``deadline`` are ``time.monotonic()`` moments, checked at every line,
    comments included (an agent's keep-alives), and at every chunk received (a line that
    never ends): from either on, a stream that gave an event ends (as if the agent closed
    it); one that gave none raises :class:`StreamOverdue` at ``deadline``.
    """
    limit = settings.AGENT_ANSWER_MAX_BYTES if limit is None else limit
    data: list[bytes] = []
    name = b""
    held = 0
    given = False
    for line in _lines(response, limit):
        now = time.monotonic()
        overdue = deadline is not None and now >= deadline
        if given and (overdue or (until is not None and now >= until)):
            return
        if overdue:
            raise StreamOverdue
        if line is None:  # a chunk within a line: only the clock to check
            continue
        if not line:
            if data:
                text = b"\n".join(data).decode("utf-8", errors="replace")
                yield SseEvent(name.decode("utf-8", errors="replace"), text)
                given = True
            data, name, held = [], b"", 0
            continue
        if line.startswith(b":"):
            continue
        field, _, value = line.partition(b":")
        value = value[1:] if value.startswith(b" ") else value
        if field == b"data":
            held += len(value) + 1
            if held > limit:
                raise AnswerTooLarge(limit)
            data.append(value)
        elif field == b"event":
            name = value[:100]  # a name, not a payload: kept short
    # An event not ended by its blank line is discarded (the SSE spec's rule).


def iter_sse(
    response: httpx.Response,
    limit: int | None = None,
    *,
    until: float | None = None,
    deadline: float | None = None,
) -> Iterator[str]:
    """The ``data`` of each server-sent event (see :func:`iter_events`)."""
    for event in iter_events(response, limit, until=until, deadline=deadline):
        yield event.data


def response_json(response: Response) -> Any:
    """The body as JSON; a body nested deeper than the text rule allows is a ValueError
    (``JSONTooDeep``), not a RecursionError that would crash the worker's task."""
    return loads_bounded(response.content)


def read_json(response: Response, what: str) -> Any:
    """The response's JSON, or :class:`A2AProtocolError` naming what was expected."""
    try:
        return response_json(response)
    except (ValueError, UnicodeDecodeError):
        ctype = response.headers.get("Content-Type", "")
        raise A2AProtocolError(
            f"The agent's {what} is not JSON (Content-Type {ctype or 'missing'}).",
            {"body": excerpt(response.text)},
        ) from None


def error_message(response: Response) -> str:
    """The agent's own error message, if its body is the A2A (or any JSON) error shape."""
    try:
        body = response_json(response)
    except (ValueError, UnicodeDecodeError):
        return excerpt(response.text)
    if isinstance(body, dict):
        error = body.get("error")
        if isinstance(error, dict) and isinstance(error.get("message"), str):
            return excerpt(error["message"])
        if isinstance(error, str):
            return excerpt(error)
        if isinstance(body.get("message"), str):
            return excerpt(body["message"])
    return excerpt(response.text)


def error_reason(response: Response) -> str:
    """The A2A 1.0 error reason (``TASK_NOT_FOUND``, ...) of an error body, if any."""
    try:
        body = response_json(response)
    except (ValueError, UnicodeDecodeError):
        return ""
    error = body.get("error") if isinstance(body, dict) else None
    details = error.get("details") if isinstance(error, dict) else None
    for detail in details if isinstance(details, list) else []:
        if isinstance(detail, dict) and isinstance(detail.get("reason"), str):
            return detail["reason"]
    return ""


def is_json(response: Response) -> bool:
    try:
        response_json(response)
    except (ValueError, UnicodeDecodeError):
        return False
    return True


def parse_event_json(data: str) -> Any:
    """One SSE ``data`` as JSON, or :class:`A2AProtocolError`."""
    try:
        return loads_bounded(data)
    except ValueError:
        raise A2AProtocolError(
            "A stream event from the agent is not JSON.", {"body": excerpt(data)}
        ) from None


def skip_message(target: CallTarget, task: dict[str, Any]) -> None:
    """A Message event after the stream named its task: skipped, with a log line.

    Once a stream named its task, only its status and artifact updates follow (A2A 1.0):
    a Message is a remark, not the answer. Taken for the answer, it ended the stream and
    replaced the task's result."""
    log.info(
        "agent %s sent a message in the stream of its task %s; skipped",
        target.agent_id,
        excerpt(str(task.get("id"))),
        extra={"agent_id": target.agent_id},
    )
