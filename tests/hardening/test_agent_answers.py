"""An agent's answer holding a NUL or a lone surrogate (artifact, status message), or JSON
nested too deep, fails its task once, as ``output_invalid`` (or a protocol error), without
sending the message again. Before, PostgreSQL's DataError made the worker re-send it five
times and end with ``internal_error`` and a SQL fragment. Real worker processes on
PostgreSQL + Redis (pass 2); in-process embedded workers on SQLite (pass 1).

So does a bare Message answer (a send's, a stream's first event) holding one anywhere
(its text, its id, its metadata, its data), which was kept in the conversation before
its parts were checked (SQLite completed the task with it), and a polled answer about
another agent task whose id holds one, which the error quoted whole. Those are driven by
the worker's own entry point, in this pass's database."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from django.conf import settings as django_settings
from django.test import override_settings
from django.utils import timezone

from a2a import creation
from a2a.models import Direction, Task, TaskMessage
from a2a.states import TaskState
from a2a.worker import process_task
from platform_site.text import find_bad_text
from tests.a2a.helpers import embedded_workers, wait_for
from tests.support.processes import beat_proc, started, worker_proc

pytestmark = [pytest.mark.slow]

FAST = {
    "A2A_POLL_INTERVAL": 0.2,
    "A2A_RETRY_BACKOFF": 0.2,
    "A2A_SWEEP_INTERVAL": 0.3,
    "A2A_HTTP_TIMEOUT": 3.0,
    "A2A_CONNECT_TIMEOUT": 0.5,
}
NUL_ARTIFACT = '{"artifactId": "a", "parts": [{"data": {"verdict": "pa\\u0000ss"}}]}'
SURROGATE_MESSAGE = '{"role": "ROLE_AGENT", "messageId": "m", "parts": [{"text": "x\\udcff"}]}'
ANSWERS = {
    "nul-artifact": '{"task": {"id": "r1", "contextId": "c1", "status": {"state": '
    '"TASK_STATE_COMPLETED"}, "artifacts": [' + NUL_ARTIFACT + "]}}",
    "surrogate-question": '{"task": {"id": "r1", "contextId": "c1", "status": {"state": '
    '"TASK_STATE_INPUT_REQUIRED", "message": ' + SURROGATE_MESSAGE + "}}}",
    "deep": '{"task": ' + "[" * 100_000 + "]" * 100_000 + "}",
}


class BadAgent(BaseHTTPRequestHandler):
    """Answers every A2A call with one canned body; counts message:send (and :stream).

    ``polled``: the body of a poll (GET tasks/{id}) instead. ``streams``: serve a card
    offering streaming, and answer message:stream with ``answer`` as its one event."""

    answer = ""
    polled: str | None = None
    streams = False
    sends: list[str] = []

    def do_POST(self) -> None:  # message:send, message:stream
        length = int(self.headers.get("Content-Length") or 0)
        body = json.loads(self.rfile.read(length) or b"{}")
        if self.path.endswith(("/message:send", "/message:stream")):
            type(self).sends.append(body.get("message", {}).get("messageId", ""))
        if self.path.endswith("/message:stream"):
            self._answer(f"data: {self.answer}\n\n", "text/event-stream")
            return
        self._answer(self.answer)

    def do_GET(self) -> None:  # tasks/{id}; the agent card when it streams
        if "agent-card" in self.path:
            if not self.streams:
                self.send_error(404)
                return
            self._answer(json.dumps(self._card()))
            return
        self._answer(self.answer if self.polled is None else self.polled)

    def _card(self) -> dict[str, Any]:
        url = f"http://127.0.0.1:{self.server.server_address[1]}"
        return {
            "name": "bad",
            "description": "bad",
            "version": "1",
            "supportedInterfaces": [
                {"url": url, "protocolBinding": "HTTP+JSON", "protocolVersion": "1.0"}
            ],
            "capabilities": {"streaming": True},
            "defaultInputModes": ["application/json"],
            "defaultOutputModes": ["application/json"],
            "skills": [],
        }

    def _answer(self, text: str, content_type: str = "application/json") -> None:
        raw = text.encode()
        self.send_response(200)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(raw)))
        self.end_headers()
        self.wfile.write(raw)

    def log_message(self, *args: Any) -> None:
        pass


@contextmanager
def bad_agent(
    answer: str, *, polled: str | None = None, streams: bool = False
) -> Iterator[tuple[str, list[str]]]:
    """A :class:`BadAgent` on a free port; yields its URL and the messageIds it was sent."""
    attrs = {"answer": answer, "polled": polled, "streams": streams, "sends": []}
    handler = type("Handler", (BadAgent,), attrs)
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}", handler.sends
    finally:
        server.shutdown()
        server.server_close()


@contextmanager
def workers() -> Iterator[None]:
    """The mode's workers: processes on PostgreSQL + Redis, else in-process."""
    with ExitStack() as stack:
        if django_settings.DISTRIBUTED:
            env = {**FAST, "ALLOW_LOOPBACK_URLS": True}
            stack.enter_context(started(worker_proc(**env), beat_proc(**env)))
        else:
            stack.enter_context(override_settings(**FAST))
            stack.enter_context(embedded_workers(sweep_interval=FAST["A2A_SWEEP_INTERVAL"]))
        yield


CASES = [
    ("nul-artifact", "output_invalid"),
    ("surrogate-question", "output_invalid"),
    ("deep", None),
]


@pytest.mark.parametrize(("answer", "code"), CASES)
def test_a_bad_answer_fails_the_task_once_embedded(
    transactional_db: None, make_skill: Any, make_agent: Any, make_user: Any, answer: str, code: Any
) -> None:
    _run(make_skill, make_agent, make_user, answer, code)


@pytest.mark.distributed
def test_bad_answers_fail_their_tasks_once_on_postgres(
    transactional_db: None, make_skill: Any, make_agent: Any, make_user: Any
) -> None:
    """The cases above, an agent each, under one start of the worker processes (each
    start takes seconds: one per case cost ten seconds each)."""
    user = make_user()
    with override_settings(ALLOW_LOOPBACK_URLS=True), ExitStack() as agents:
        runs = []
        for answer, code in CASES:
            url, sends = agents.enter_context(bad_agent(ANSWERS[answer]))
            skill = make_skill(id=f"review-{answer}", max_attempts=2)
            make_agent(id=f"agent-{answer}", skills=[skill], a2a_endpoint=url)
            task = creation.create_task(skill_id=skill.id, input={"product": "x"}, user=user)
            runs.append((task, sends, code))
        with workers():
            ended = [(wait_for(task, timeout=40), sends, code) for task, sends, code in runs]
    for task, sends, code in ended:
        _check(task, sends, code)


def _run(make_skill: Any, make_agent: Any, make_user: Any, answer: str, code: str | None) -> None:
    with override_settings(ALLOW_LOOPBACK_URLS=True), bad_agent(ANSWERS[answer]) as (url, sends):
        make_agent(skills=[make_skill(max_attempts=2)], a2a_endpoint=url)
        task = creation.create_task(skill_id="ce-review", input={"product": "x"}, user=make_user())
        with workers():
            task = wait_for(task, timeout=40)
    _check(task, sends, code)


def _check(task: Task, sends: list[str], code: str | None) -> None:
    assert task.state == TaskState.FAILED, task.error
    assert task.error["code"] != "internal_error", task.error
    if code:
        assert task.error["code"] == code
        assert task.error["details"]["problem"] in ("a NUL character", "a lone surrogate")
    assert "SQL" not in task.error["message"]
    assert len(set(sends)) == 1  # one attempt: never a new message for the same answer
    if code:
        assert len(sends) == 1  # and not re-sent at all
    assert Task.objects.get(pk=task.pk).artifacts in (None, [])


# --- a bare Message answer, and a polled answer about another agent task -------------

DATA = '[{"data": {"verdict": "pass"}}]'
MESSAGES = {  # where the bad text is -> the bare Message holding it (JSON escapes)
    "text": '{"messageId": "m1", "parts": [{"text": "a\\u0000b"}]}',
    "messageId": '{"messageId": "m\\u0000", "parts": ' + DATA + "}",
    "metadata-key": '{"messageId": "m1", "metadata": {"k\\udcff": 1}, "parts": ' + DATA + "}",
    "metadata-value": '{"messageId": "m1", "metadata": {"k": "v\\ud800"}, "parts": ' + DATA + "}",
    "data": '{"messageId": "m1", "parts": [{"data": {"verdict": "pa\\u0000ss"}}]}',
}
FIELDS = {
    "text": "message.parts[0].text",
    "messageId": "message.messageId",
    "metadata-key": "message.metadata (a key)",
    "metadata-value": "message.metadata.k",
    "data": "message.parts[0].data.verdict",
}


def _bare(where: str) -> str:
    """The agent's answer: the Message of ``MESSAGES[where]``, from the agent, bare."""
    return '{"message": ' + MESSAGES[where].replace("{", '{"role": "ROLE_AGENT", ', 1) + "}"


def _drive(task: Task, rounds: int = 7) -> Task:
    """Run the task's due actions as the worker does, until it ends (a failed write is
    retried by the worker: that is what re-sent the message before)."""
    for _ in range(rounds):
        Task.objects.filter(pk=task.pk).update(next_poll_at=timezone.now(), lease_until=None)
        process_task(task.pk)
        task = Task.objects.get(pk=task.pk)
        if task.is_terminal:
            break
    return task


def _assert_failed_once(task: Task, sends: list[str], code: str) -> None:
    assert task.state == TaskState.FAILED, (task.state, task.error)
    assert task.error["code"] == code, task.error
    assert "SQL" not in task.error["message"]
    assert find_bad_text(task.error) is None  # nothing unstorable kept (SQLite)
    assert not (task.metadata or {}).get("internalErrors")
    assert len(sends) == 1  # the agent got the message once


@pytest.mark.parametrize("where", list(MESSAGES))
@pytest.mark.parametrize("how", ["send", "stream"])
def test_a_bare_message_with_bad_text_fails_the_task_once(
    transactional_db: None,
    make_skill: Any,
    make_agent: Any,
    make_user: Any,
    where: str,
    how: str,
) -> None:
    streams = how == "stream"
    with (
        override_settings(ALLOW_LOOPBACK_URLS=True, A2A_LIST_INTERVAL=0),
        bad_agent(_bare(where), streams=streams) as (url, sends),
    ):
        make_agent(skills=[make_skill()], a2a_endpoint=url, polling=not streams)
        task = creation.create_task(skill_id="ce-review", input={"product": "x"}, user=make_user())
        task = _drive(task)
    _assert_failed_once(task, sends, "output_invalid")
    assert task.error["details"]["field"] == FIELDS[where]
    assert task.error["details"]["problem"] in ("a NUL character", "a lone surrogate")
    # Nothing of the answer was kept: no message from the agent, no artifacts, no output.
    assert not TaskMessage.objects.filter(task=task, direction=Direction.FROM_AGENT).exists()
    assert task.artifacts in (None, [])
    assert task.output is None


@pytest.mark.parametrize("rid", ["r\\u0000", "r\\ud800"], ids=["nul", "surrogate"])
def test_a_polled_answer_about_another_task_with_a_bad_id_fails_clearly(
    transactional_db: None, make_skill: Any, make_agent: Any, make_user: Any, rid: str
) -> None:
    working = '{"task": {"id": "r1", "contextId": "c1", "status": {"state": "TASK_STATE_WORKING"}}}'
    other = '{"id": "' + rid + '", "contextId": "c1", "status": {"state": "TASK_STATE_COMPLETED"}}'
    with (
        override_settings(ALLOW_LOOPBACK_URLS=True, A2A_LIST_INTERVAL=0),
        bad_agent(working, polled=other) as (url, sends),
    ):
        make_agent(skills=[make_skill()], a2a_endpoint=url)
        task = creation.create_task(skill_id="ce-review", input={"product": "x"}, user=make_user())
        task = _drive(task)
    _assert_failed_once(task, sends, "not_a2a")
    # The ids are named by excerpts: the agent's with U+FFFD where its bad character was.
    assert task.error["details"] == {"remoteTaskId": "r1", "answeredTaskId": "r\ufffd"}
    assert task.remote_task_id == "r1"
