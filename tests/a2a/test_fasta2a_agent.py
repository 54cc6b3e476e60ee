"""The platform drives an agent built with FastA2A, the A2A library behind Pydantic AI's
``agent.to_a2a()``: another library's server (its own storage, broker and one-at-a-time
worker, naive timestamps), A2A 1.0 over JSON-RPC at its root URL. The live platform runs
in this pass's mode. Slow: one test covering a lot."""

from __future__ import annotations

from typing import Any

import pytest

from a2a.models import TaskEvent
from a2a.states import TaskState
from tests.a2a.helpers import wait_for
from tests.a2a.test_agent_push_live import live
from tests.a2a.test_library_agents import ENV, start
from tests.support.fasta2a_agent import run_fasta2a_agent

pytestmark = pytest.mark.slow


def test_a_fasta2a_agent_completes_and_fails_tasks(
    transactional_db: None, make_skill: Any, make_agent: Any, make_user: Any
) -> None:
    with run_fasta2a_agent() as peer:
        agent = make_agent(skills=[make_skill()], a2a_endpoint=peer.url)
        user = make_user()
        with live(**ENV):
            tasks = {
                "complete": start(user, "complete"),
                "slow": start(user, "slow", seconds=2),  # in flight at the first listing
                "crash": start(user, "crash"),
            }
            tasks = {name: wait_for(task, timeout=30) for name, task in tasks.items()}
        calls = peer.calls()
    for name in ("complete", "slow"):
        task = tasks[name]
        assert (task.state, task.output) == (TaskState.COMPLETED, {"verdict": "pass"}), name
    assert tasks["crash"].state == TaskState.FAILED
    assert tasks["crash"].error["code"] == "agent_failed"
    for task in tasks.values():
        assert TaskEvent.objects.filter(task=task, to_state=task.state).count() == 1
    # One SendMessage per task. FastA2A answers ListTasks UnsupportedOperation: asked
    # once, the agent is marked "no listing" and its tasks are polled (GetTask).
    assert calls["SendMessage"] == 3
    assert calls["ListTasks"] == 1
    assert calls["GetTask"] >= 3
    assert set(calls) <= {"SendMessage", "ListTasks", "GetTask"}
    agent.refresh_from_db()
    assert agent.listing is False
    assert "ListTasks with JSON-RPC error -32004" in agent.no_listing_reason
