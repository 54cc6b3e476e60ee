"""Text logs (``LOG_FORMAT=text``, the default) keep one line per message: what others wrote
and a message quotes (a request's path, an agent's failure text) cannot write a line of its
own that looks like the platform's. The JSON format escapes them by being JSON."""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import Iterator

import pytest
from django.conf import settings

from a2a import agent_push_asgi
from a2a.models import Task
from a2a.states import TaskState
from platform_site.logs import _CONTROL, JSONFormatter, PlainFormatter
from tests.a2a.helpers import fresh, post, push, status_update

FORGED = "2026-12-07 07:00:00,000 ERROR django.security.Admin: FORGED password reset by root"


@pytest.fixture
def text_log() -> Iterator[list[str]]:
    """The lines the console handler's text formatter writes, as settings configure it."""
    config = settings.LOGGING["formatters"]["plain"]
    formatter = PlainFormatter(config["format"])
    assert config["()"] == "platform_site.logs.PlainFormatter"
    lines: list[str] = []

    class Lines(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            lines.extend(formatter.format(record).split("\n"))

    handler = Lines(level=logging.INFO)
    root = logging.getLogger()
    level = root.level
    root.addHandler(handler)
    root.setLevel(logging.INFO)
    yield lines
    root.removeHandler(handler)
    root.setLevel(level)


def forged(lines: list[str]) -> list[str]:
    return [line for line in lines if line.startswith(FORGED)]


def test_a_path_cannot_write_a_line_of_the_log(pushed_task: Task, text_log: list[str]) -> None:
    # Anyone, no token: the path is decoded before the app sees it (%0A is a newline).
    response = post("/api/a2a/push/x%0A" + FORGED.replace(" ", "%20"), {}, None)
    assert response.status_code == 404
    assert any("push/x\\n2026" in line for line in text_log)
    assert forged(text_log) == []


def test_an_agents_failure_text_cannot_write_a_line_of_the_log(
    pushed_task: Task, text_log: list[str]
) -> None:
    body = status_update("TASK_STATE_FAILED", "2026-12-01T10:00:05Z")
    message = {"messageId": "m1", "role": "ROLE_AGENT", "parts": [{"text": "boom\n" + FORGED}]}
    body["statusUpdate"]["status"]["message"] = message
    assert push(pushed_task, body).status_code == 200
    assert fresh(pushed_task).state == TaskState.FAILED
    assert any("boom\\n2026" in line for line in text_log)
    assert forged(text_log) == []


def test_control_characters_are_escaped_and_a_traceback_keeps_its_lines() -> None:
    formatter = PlainFormatter("%(levelname)s %(message)s")
    record = logging.LogRecord(
        "x", logging.INFO, "p", 1, "a\r\nb\x1b[31m\u2028\tc %s", ("\n",), None
    )
    assert formatter.format(record) == "INFO a\\r\\nb\\x1b[31m\\u2028\tc \\n"
    try:
        raise ValueError("x")
    except ValueError:
        failure = logging.LogRecord("x", logging.ERROR, "p", 1, "boom", (), sys.exc_info())
    lines = formatter.format(failure).split("\n")
    assert lines[0] == "ERROR boom"
    assert lines[1] == "Traceback (most recent call last):"


def test_an_exceptions_message_cannot_write_a_line_of_the_log() -> None:
    # An exception quotes what others wrote (an agent's output in a validation error):
    # its message keeps to its line, in every exception of the chain and in a group.
    formatter = PlainFormatter("%(levelname)s %(message)s")
    try:
        try:
            raise KeyError("k\n" + FORGED)
        except KeyError as cause:
            raise ExceptionGroup("g\r" + FORGED, [ValueError("v\n" + FORGED)]) from cause
    except ExceptionGroup:
        failure = logging.LogRecord("x", logging.ERROR, "p", 1, "boom", (), sys.exc_info())
    text = formatter.format(failure)
    lines = text.split("\n")
    assert forged(lines) == []
    assert lines[0] == "ERROR boom"
    assert "KeyError: 'k\\n2026" in text
    assert "ExceptionGroup: g\\r2026" in text
    assert "ValueError: v\\n2026" in text
    assert "The above exception was the direct cause of the following exception:" in lines
    assert sum("Traceback (most recent call last):" in line for line in lines) == 2


def test_a_json_line_stays_one_line_whatever_the_path(
    pushed_task: Task, caplog: pytest.LogCaptureFixture
) -> None:
    """``LOG_FORMAT=json`` writes one object per line: JSON escapes C0 itself, but DEL, C1
    (NEL, an 8-bit CSI) and U+2028/2029 went raw, splitting the line for a reader that
    splits on Unicode line ends (``str.splitlines``) and reaching the terminal."""
    agent_push_asgi._logged_at.clear()  # refusals are logged once a while per code
    with caplog.at_level(logging.INFO):
        response = post("/api/a2a/push/x%E2%80%A8%C2%85%C2%9B31m%7F" + FORGED, {}, None)
    assert response.status_code == 404
    [record] = [r for r in caplog.records if "push/x" in r.getMessage()]
    line = JSONFormatter().format(record)
    assert len(line.splitlines()) == 1, line.splitlines()
    assert not _CONTROL.search(line)
    assert "push/x\u2028\x85\x9b31m\x7f2026" in json.loads(line)["message"]
