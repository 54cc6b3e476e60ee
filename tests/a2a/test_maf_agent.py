"""The platform drives agents hosted with Microsoft Agent Framework's ``A2AExecutor``
(a2a-sdk 1.x's JSON-RPC server with the framework's executor), end to end. What differs:
the card names text input, so the input goes as JSON text (the executor hands the agent
the message's text alone); the executor as it comes answers in the message of a
``working`` status and then completes with no artifact, and with ``stream=True`` streams
the answer in chunks appended to one artifact; a failure's text is the error's. The
live platform runs in this pass's mode. Slow: one test covering both agents."""

from __future__ import annotations

from typing import Any

import pytest

from a2a.creation import create_task
from a2a.models import Task
from a2a.services import cancel_task
from a2a.states import TaskState
from tests.a2a.helpers import wait_for
from tests.a2a.test_agent_push_live import live
from tests.a2a.test_library_agents import ENV
from tests.support.maf_agent import run_maf_agent

pytestmark = pytest.mark.slow


def start(user: Any, skill_id: str, behaviour: str, **extra: Any) -> Task:
    data = {"product": "lamp", "behaviour": behaviour, **extra}
    return create_task(skill_id=skill_id, input=data, user=user)


def test_agent_framework_agents_complete_fail_and_are_canceled(
    transactional_db: None, make_skill: Any, make_agent: Any, make_user: Any
) -> None:
    with run_maf_agent() as peer:
        for path in ("plain", "stream"):
            skill = make_skill(id=f"review-{path}")
            make_agent(id=f"maf-{path}", skills=[skill], a2a_endpoint=f"{peer.url}/{path}/")
        user = make_user()
        with live(**ENV):
            tasks: dict[str, Task] = {}
            for path in ("plain", "stream"):
                skill_id = f"review-{path}"
                for behaviour in ("complete", "fail"):
                    tasks[f"{path}-{behaviour}"] = start(user, skill_id, behaviour)
                slow = start(user, skill_id, "slow", seconds=20)
                slow = wait_for(slow, lambda t: bool(t.remote_task_id), timeout=30)
                cancel_task(slow, reason="no longer needed")
                tasks[f"{path}-slow"] = slow
            tasks = {name: wait_for(task, timeout=30) for name, task in tasks.items()}
            for path in ("plain", "stream"):  # ended here at once; then the agent is told
                told = lambda t: "remoteCancel" in t.metadata  # noqa: E731
                tasks[f"{path}-slow"] = wait_for(tasks[f"{path}-slow"], told, timeout=30)
    for path in ("plain", "stream"):
        done, failed, slow = (tasks[f"{path}-{name}"] for name in ("complete", "fail", "slow"))
        assert (done.state, done.output, done.error) == (
            TaskState.COMPLETED,
            {"verdict": "pass"},
            None,
        ), path
        # The agent read "fail" from the JSON text: a data part never reaches it (the
        # executor passes the message's text alone), and with no text it completes.
        assert failed.state == TaskState.FAILED, path
        assert failed.error["code"] == "agent_failed"
        assert "The model could not review this product." in failed.error["message"]
        assert slow.state == TaskState.CANCELED, path
        assert slow.metadata["remoteCancel"]["state"] == TaskState.CANCELED
        for task in (done, failed, slow):
            assert task.attempts == 1
            assert task.metadata["followedBy"] == "list"
