"""Logs that explain: JSON lines with the ids of what they are about, one INFO line per
lifecycle event and none per poll, and the secret scan every test runs under."""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest

from a2a import agent_updates, creation, services
from agent_profiles.keys import generate
from platform_site.logs import BoundIds, JSONFormatter, bound
from tests.support.secrets_scan import find_secrets


def record(msg: str, *args: Any, **extra: Any) -> logging.LogRecord:
    rec = logging.LogRecord("a2a.lifecycle", logging.INFO, __file__, 1, msg, args, None)
    for key, value in extra.items():
        setattr(rec, key, value)
    return rec


def test_a_json_line_parses_and_carries_the_ids_given() -> None:
    line = JSONFormatter().format(record("task %s created", "t-1", task_id="t-1", agent_id="a"))
    parsed = json.loads(line)
    assert parsed["message"] == "task t-1 created"
    assert (parsed["task_id"], parsed["agent_id"]) == ("t-1", "a")
    assert (parsed["level"], parsed["logger"]) == ("INFO", "a2a.lifecycle")
    assert parsed["time"].endswith("+00:00")


def test_bound_ids_reach_every_line_inside() -> None:
    rec = record("polling")
    with bound(task_id="t-2", agent_id="agent-b"):
        BoundIds().filter(rec)
    outside = record("later")
    BoundIds().filter(outside)
    assert json.loads(JSONFormatter().format(rec))["task_id"] == "t-2"
    assert "task_id" not in json.loads(JSONFormatter().format(outside))


def test_a_traceback_stays_inside_its_json_line() -> None:
    try:
        raise ValueError("boom")
    except ValueError:
        import sys

        rec = record("failed")
        rec.exc_info = sys.exc_info()
    line = JSONFormatter().format(rec)
    assert "\n" not in line
    assert "ValueError: boom" in json.loads(line)["exc_info"]


def lifecycle_lines(caplog: Any) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name.endswith(".lifecycle")]


def test_one_info_line_per_lifecycle_event_and_none_per_poll(
    caplog: Any,
    make_skill: Any,
    make_agent: Any,
    make_user: Any,
    django_capture_on_commit_callbacks: Any,
) -> None:
    skill = make_skill()
    make_agent(skills=[skill])
    caplog.set_level(logging.INFO)
    with django_capture_on_commit_callbacks(execute=True):
        task = creation.create_task(skill_id=skill.id, input={"product": "x"}, user=make_user())
    working = {"state": "TASK_STATE_WORKING"}
    with django_capture_on_commit_callbacks(execute=True):
        agent_updates.apply_agent_update(task, status=working, remote={"id": "r1"}, via="a2a")
    polls_before = len(lifecycle_lines(caplog))
    with django_capture_on_commit_callbacks(execute=True):
        for _ in range(3):  # three polls that say the same
            agent_updates.apply_agent_update(task, status=working, via="a2a")
    assert len(lifecycle_lines(caplog)) == polls_before
    question = {"messageId": "q", "role": "ROLE_AGENT", "parts": [{"text": "EU?"}]}
    with django_capture_on_commit_callbacks(execute=True):
        agent_updates.apply_agent_update(
            task, status={"state": "TASK_STATE_INPUT_REQUIRED", "message": question}, via="a2a"
        )
    with django_capture_on_commit_callbacks(execute=True):
        services.cancel_task(task)
    messages = [r.getMessage() for r in lifecycle_lines(caplog)]
    events = [m.removeprefix(f"task {task.pk} ") for m in messages]
    assert len(events) == 3
    assert events[0].startswith("created: skill ce-review, agent agent-one")
    assert events[1] == "waits for a person (TASK_STATE_INPUT_REQUIRED)"
    assert events[2].startswith("ended TASK_STATE_CANCELED after ")
    assert all(r.levelno == logging.INFO for r in lifecycle_lines(caplog))
    assert all(r.task_id == str(task.pk) for r in lifecycle_lines(caplog))  # type: ignore[attr-defined]
    assert all(r.agent_id == "agent-one" for r in lifecycle_lines(caplog))  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    "line",
    [
        f"registered with {generate('a2a').raw}",
        f"user token {generate('usr').raw}",
        "sending Authorization: Bearer abcdefghijklmnop123",
        'auth {"type": "bearer", "token": "sekrit-token-1"}',
        "{'clientSecret': 'hunter22'}",
        "stored gAAAAABmZxyz0123456789abcdefghijklmnopqrstuvwxyzABCDEFGH",
    ],
)
def test_the_secret_scan_finds_keys_tokens_and_credentials(line: str) -> None:
    assert find_secrets(line)


@pytest.mark.parametrize(
    "line",
    [
        "agent acme registered (new, active): skills ce-review",
        "/metrics: loopback callers only, or Authorization: Bearer <METRICS_TOKEN>",
        "key prefix 1a2b3c4d rotated",
        'the "token" field is required',
    ],
)
def test_the_secret_scan_leaves_ordinary_lines_alone(line: str) -> None:
    assert not find_secrets(line)


def test_a_poll_that_breaks_and_a_read_at_the_deadline_name_their_task(
    caplog: Any, make_skill: Any, make_agent: Any, make_user: Any, monkeypatch: Any
) -> None:
    """The engine's and the deadline's failure lines carry ``task_id`` / ``agent_id``."""
    from a2a import agent_reads, agent_registry, deadlines, engine

    skill = make_skill()
    agent = make_agent(skills=[skill])
    task = creation.create_task(skill_id=skill.id, input={"product": "x"}, user=make_user())

    def broken(*args: Any, **kwargs: Any) -> None:
        raise RuntimeError("a bug in a transport")

    monkeypatch.setattr(agent_reads, "read_task", broken)
    target = agent_registry.target_for(agent)
    caplog.set_level(logging.INFO)
    engine._call(engine.Polled(task, target))
    deadlines._read(target, task)
    lines = [r for r in caplog.records if r.name in ("a2a.engine", "a2a.deadlines")]
    assert len(lines) == 2, [r.getMessage() for r in caplog.records]
    assert [getattr(r, "task_id", None) for r in lines] == [str(task.pk)] * 2
    assert [getattr(r, "agent_id", None) for r in lines] == ["agent-one"] * 2
