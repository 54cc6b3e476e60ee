"""An agent's stream read byte by byte: a line trickled in many chunks is searched once,
not again at every chunk; its line ends may fall anywhere between chunks (a CRLF split
in two, CR-only ends); one byte order mark at its start is ignored, as the SSE spec says;
and the messages an agent sends on any path (a stream's or a poll's status messages, a
bare Message answer) are kept up to ``TASK_AGENT_MESSAGES_MAX``, as pushed ones are."""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from starlette.responses import Response

from a2a import creation
from a2a.agent_updates import apply_agent_reply, apply_agent_update
from a2a.models import Direction, Task, TaskMessage
from a2a.states import TaskState
from a2a.transports import answers
from a2a.transports.answers import SseEvent, iter_events
from agent_profiles.guarded_pool import AnswerTooLarge
from tests.support.raw_sse import (
    RawStreamAgent,
    register,
    run_raw_stream_agent,
    sse,
    status_event,
    task_event,
)
from tests.support.scripted_agent import run_out, scripted_agent, task_answer

pytestmark = pytest.mark.django_db(transaction=True)

OUTPUT = {"artifacts": [{"artifactId": "r", "parts": [{"data": {"verdict": "pass"}}]}]}
WORKING, COMPLETED = "TASK_STATE_WORKING", "TASK_STATE_COMPLETED"
BOM = b"\xef\xbb\xbf"


def read(chunks: list[bytes], limit: int = 1_000_000) -> list[SseEvent]:
    return list(iter_events(httpx.Response(200, content=iter(chunks)), limit=limit))


def start(user: Any) -> Task:
    return creation.create_task(skill_id="ce-review", input={"product": "lamp"}, user=user)


def agent_message(n: int) -> dict[str, Any]:
    return {"role": "ROLE_AGENT", "messageId": f"m{n}", "parts": [{"text": f"step {n}"}]}


def from_agent(task: Task) -> int:
    return TaskMessage.objects.filter(task=task, direction=Direction.FROM_AGENT).count()


@pytest.fixture
def raw(make_skill: Any, make_agent: Any, settings: Any) -> Iterator[RawStreamAgent]:
    """A registered HTTP+JSON agent that cannot be polled and streams what a test sets."""
    settings.ALLOW_LOOPBACK_URLS = True
    with run_raw_stream_agent() as agent:
        register(make_agent, make_skill(id="ce-review"), agent)
        yield agent


# --- a line trickled in many chunks ---------------------------------------------------------


class CountingLineEnds:
    """The reader's line-end pattern, counting the bytes it is asked to search."""

    def __init__(self, pattern: re.Pattern[bytes]) -> None:
        self.pattern = pattern
        self.searched = 0

    def split(self, data: bytes) -> list[bytes]:
        self.searched += len(data)
        return self.pattern.split(data)

    def finditer(self, data: bytes) -> Iterator[re.Match[bytes]]:
        self.searched += len(data)
        return self.pattern.finditer(data)


def test_a_line_trickled_in_many_chunks_is_searched_once(monkeypatch: Any) -> None:
    """Each chunk copied the whole unfinished line and searched it again for its end: an
    agent trickling a line up to the 10 MB cap cost half a minute of CPU. The bytes
    searched now grow with the bytes received, not with their square."""
    counting = CountingLineEnds(answers._LINE_END)
    monkeypatch.setattr(answers, "_LINE_END", counting)
    value = json.dumps({"text": "x" * 40_000}).encode()
    stream = b"data: " + value + b"\r\n\r\n"
    chunks = [stream[at : at + 100] for at in range(0, len(stream), 100)]
    assert read(chunks) == [SseEvent("", value.decode())]
    assert counting.searched <= 2 * len(stream)  # it was 200 times that


def test_an_endless_line_is_refused_at_the_cap_however_it_comes() -> None:
    with pytest.raises(AnswerTooLarge):
        read([b"data: "] + [b"x" * 10] * 200, limit=1000)


STREAM = (
    BOM + b"event: a\r\ndata: 1\r\ndata: 2\r\n\r\n"  # CRLF ends
    b"data: x\r\r"  # CR-only ends
    b"data: y\n\n: a comment\ndata: z\r\n\r\n"  # LF ends, a comment
    b"data: cut"  # never ended
)
EVENTS = [SseEvent("a", "1\n2"), SseEvent("", "x"), SseEvent("", "y"), SseEvent("", "z")]


def test_line_ends_and_the_mark_are_read_wherever_the_chunks_split_them() -> None:
    """A CR at the end of a chunk ended its line, whether the next chunk starts with its
    LF (one line end) or not (CR-only ends); the byte order mark too may come split."""
    assert read([STREAM]) == EVENTS
    assert read([bytes([b]) for b in STREAM]) == EVENTS
    for one in range(len(STREAM)):
        for two in range(one, len(STREAM), 3):
            chunks = [STREAM[:one], STREAM[one:two], STREAM[two:]]
            assert read(chunks) == EVENTS, (one, two)


def test_a_chunk_that_ends_no_line_still_gives_the_clock_a_turn() -> None:
    lines = answers._lines(
        httpx.Response(200, content=iter([b"\xef", b"\xbb\xbfda", b"ta: 1\r", b"\n"])), 99
    )
    assert list(lines) == [None, None, b"data: 1", None]


# --- a byte order mark ---------------------------------------------------------------------


def test_one_byte_order_mark_at_the_start_is_ignored_and_only_one() -> None:
    """Kept, the mark made the first field ``\\ufeffdata``: the first event was lost."""
    assert read([BOM + b"data: 1\n\n"]) == [SseEvent("", "1")]
    assert read([b"data: 1\n\n" + BOM + b"data: 2\n\n"]) == [SseEvent("", "1")]
    assert read([BOM + BOM + b"data: 1\n\n"]) == []


def test_a_stream_that_starts_with_a_byte_order_mark_completes_its_task(
    raw: RawStreamAgent, make_user: Any
) -> None:
    """It failed ``not_a2a`` (and the agent was marked unhealthy)."""
    raw.stream = lambda: [BOM + sse(task_event("t1", COMPLETED, **OUTPUT))]
    task = run_out(start(make_user()))
    assert task.state == TaskState.COMPLETED, task.error
    assert task.output == {"verdict": "pass"}


# --- the agent's messages, capped on every path ----------------------------------------------


def test_streamed_status_messages_stop_at_the_cap_and_the_task_goes_on(
    raw: RawStreamAgent, make_user: Any, settings: Any, caplog: Any
) -> None:
    """Only pushes were capped: 40 streamed status messages left 40 rows (3000, 3000)."""
    settings.TASK_AGENT_MESSAGES_MAX = 5
    events = [sse(task_event("t1", WORKING))]
    events += [sse(status_event("t1", WORKING, message=agent_message(n))) for n in range(40)]
    events.append(sse(task_event("t1", COMPLETED, **OUTPUT)))
    raw.stream = lambda: events
    with caplog.at_level(logging.WARNING, logger="a2a.agent_messages"):
        task = run_out(start(make_user()))
    assert task.state == TaskState.COMPLETED, task.error
    assert from_agent(task) == 5
    kept = TaskMessage.objects.filter(task=task, direction=Direction.FROM_AGENT)
    assert sorted(kept.values_list("message_id", flat=True)) == [f"m{n}" for n in range(5)]
    told = [r for r in caplog.records if "TASK_AGENT_MESSAGES_MAX" in r.getMessage()]
    assert len(told) == 1  # once for the task, not once for each of 35 messages


def test_polled_status_messages_stop_at_the_cap(
    make_agent: Any, make_skill: Any, make_user: Any, settings: Any
) -> None:
    settings.ALLOW_LOOPBACK_URLS = True
    settings.TASK_AGENT_MESSAGES_MAX = 3
    polls = iter(range(1, 9))

    def answer(kind: str, body: Any) -> Response:
        if kind == "send":
            return task_answer(WORKING, agent_message(0))
        n = next(polls, None)
        if n is None:
            return task_answer(COMPLETED, **OUTPUT)
        return task_answer(WORKING, agent_message(n))

    with scripted_agent(make_agent, make_skill, "HTTP+JSON") as agent:
        agent.answer = answer
        task = run_out(start(make_user()))
    assert task.state == TaskState.COMPLETED, task.error
    assert agent.calls["get"] >= 9
    assert from_agent(task) == 3


def test_the_cap_holds_for_a_status_and_a_bare_message_and_a_kept_one_repeats(
    task: Task, settings: Any
) -> None:
    settings.TASK_AGENT_MESSAGES_MAX = 2
    for n in range(4):
        apply_agent_update(task, status={"state": WORKING, "message": agent_message(n)}, via="poll")
    assert from_agent(task) == 2
    # Past the cap the status still applies: the latest message is the task's status message.
    task.refresh_from_db()
    assert task.status_message["messageId"] == "m3"
    apply_agent_update(task, status={"state": WORKING, "message": agent_message(0)}, via="poll")
    answer = {**agent_message(9), "parts": [{"data": {"verdict": "pass"}}]}
    apply_agent_reply(task, task_json=None, message=answer, via="send")
    task.refresh_from_db()
    assert task.state == TaskState.COMPLETED, task.error
    assert task.output == {"verdict": "pass"}
    assert from_agent(task) == 2
