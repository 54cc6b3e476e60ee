"""An agent's answer holding a NUL or a lone surrogate (artifact, status message), or JSON
nested too deep, fails its task once, as ``output_invalid`` (or a protocol error), without
sending the message again. Before, PostgreSQL's DataError made the worker re-send it five
times and end with ``internal_error`` and a SQL fragment. Real worker processes on
PostgreSQL + Redis (pass 2); in-process embedded workers on SQLite (pass 1)."""

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

from a2a import services
from a2a.models import Task
from a2a.states import TaskState
from tests.a2a.helpers import embedded_workers, wait_for
from tests.support.processes import celery_beat, celery_worker

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
    """Answers every A2A call with one canned body; counts message:send."""

    answer = ""
    sends: list[str] = []

    def do_POST(self) -> None:  # message:send
        length = int(self.headers.get("Content-Length") or 0)
        body = json.loads(self.rfile.read(length) or b"{}")
        if self.path.endswith("/message:send"):
            type(self).sends.append(body.get("message", {}).get("messageId", ""))
        self._answer()

    def do_GET(self) -> None:  # tasks/{id}; no agent card
        if "agent-card" in self.path:
            self.send_error(404)
            return
        self._answer()

    def _answer(self) -> None:
        raw = self.answer.encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(raw)))
        self.end_headers()
        self.wfile.write(raw)

    def log_message(self, *args: Any) -> None:
        pass


@contextmanager
def bad_agent(answer: str) -> Iterator[tuple[str, list[str]]]:
    handler = type("Handler", (BadAgent,), {"answer": answer, "sends": []})
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
            stack.enter_context(celery_worker(**env))
            stack.enter_context(celery_beat(**env))
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
@pytest.mark.parametrize(("answer", "code"), CASES)
def test_a_bad_answer_fails_the_task_once_on_postgres(
    transactional_db: None, make_skill: Any, make_agent: Any, make_user: Any, answer: str, code: Any
) -> None:
    _run(make_skill, make_agent, make_user, answer, code)


def _run(make_skill: Any, make_agent: Any, make_user: Any, answer: str, code: str | None) -> None:
    with override_settings(ALLOW_LOOPBACK_URLS=True), bad_agent(ANSWERS[answer]) as (url, sends):
        make_agent(skills=[make_skill(max_attempts=2)], a2a_endpoint=url)
        task = services.create_task(skill_id="ce-review", input={"product": "x"}, user=make_user())
        with workers():
            task = wait_for(task, timeout=40)
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
