"""What the push webhook tells its operator: every push counted by result, refusals logged
(never the token), at most a line a second per reason however many forged pushes come."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from a2a import agent_push_tokens
from a2a.models import Task
from tests.a2a.helpers import push, status_update

T1 = "2026-12-01T10:00:01Z"


@pytest.fixture
def task(pushed_task: Task) -> Task:
    return pushed_task


@pytest.fixture
def refusal_log() -> Iterator[None]:
    """The refusals' log throttle starts afresh (an earlier test's refusal would hold back
    this test's first line)."""
    from a2a import agent_push_asgi

    agent_push_asgi._logged_at.clear()
    agent_push_asgi._not_logged.clear()
    yield
    agent_push_asgi._logged_at.clear()
    agent_push_asgi._not_logged.clear()


def test_pushes_are_counted_by_result_and_refusals_logged(
    task: Task, caplog: pytest.LogCaptureFixture, refusal_log: None
) -> None:
    from prometheus_client.parser import text_string_to_metric_families

    from platform_site.metrics import render

    def counts() -> dict[str, float]:
        return {
            s.labels["result"]: s.value
            for family in text_string_to_metric_families(render().decode())
            for s in family.samples
            if s.name == "a2a_agent_pushes_total"
        }

    before = counts()
    token = agent_push_tokens.token_for(task.pk, task.agent_id, 1)
    with caplog.at_level("INFO", logger="a2a.agent_push_asgi"):
        push(task, status_update("TASK_STATE_WORKING", T1))
        push(task, status_update("TASK_STATE_WORKING"), token="forged")
        push(task, status_update("TASK_STATE_SUBMITTED", "2026-01-01T00:00:00Z"))
    after = counts()
    moved = {k: after.get(k, 0) - before.get(k, 0) for k in after}
    assert {k: v for k, v in moved.items() if v} == {
        "applied": 1,
        "unauthorized": 1,
        "stale_update": 1,
    }
    refusals = [r.getMessage() for r in caplog.records if "refused" in r.getMessage()]
    assert len(refusals) == 2
    assert all(f"/api/a2a/push/{task.pk}/{task.agent_id}/1" in line for line in refusals)
    assert not any(token in line or "forged" in line for line in refusals)


def test_a_flood_of_refusals_is_counted_but_logged_once_a_second(
    task: Task, caplog: pytest.LogCaptureFixture, refusal_log: None, monkeypatch: Any
) -> None:
    """Anyone can post forged pushes; the log gets a line a second per reason, saying how
    many it left out, and the counter gets them all."""
    from a2a import agent_push_asgi

    clock = [1000.0]
    monkeypatch.setattr(agent_push_asgi, "_clock", lambda: clock[0])
    with caplog.at_level("INFO", logger="a2a.agent_push_asgi"):
        for _ in range(5):
            forged = push(task, status_update("TASK_STATE_WORKING"), token="forged")
            assert forged.status_code == 401
        clock[0] += 1.5
        push(task, status_update("TASK_STATE_WORKING"), token="forged")
    lines = [r.getMessage() for r in caplog.records if "refused" in r.getMessage()]
    assert len(lines) == 2
    assert "more" not in lines[0]
    assert "(4 more unauthorized refusals since the last line)" in lines[1]
