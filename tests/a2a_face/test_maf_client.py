"""Microsoft Agent Framework's ``A2AAgent`` (its A2A client, as the framework's apps and
workflows call other agents; in its own environment) uses the platform as a remote
agent, against a real daphne: over each binding of the platform's card, and given only a
URL. Slow (boots processes)."""

from __future__ import annotations

import json
import subprocess
from typing import Any

import pytest

from a2a.models import Task
from a2a.states import TaskState
from tests.support.maf_client import maf_python
from tests.support.venvs import BASE_DIR

pytestmark = pytest.mark.slow

DONE = {"verdict": "pass"}


def test_the_agent_framework_client_uses_the_platform(world: dict[str, Any]) -> None:
    """Per binding: a review that completes, one that asks and is answered in the same
    session (the framework sends the answer with the task's id), one that fails, one
    streamed, one in the background followed by GetTask and one by resubscribing. Then
    the URL alone, where the framework posts JSON-RPC: the platform's and an agent's."""
    run = subprocess.run(
        [
            str(maf_python()),
            "-m",
            "tests.support.maf_client",
            world["url"],
            world["alice"],
            world["agent"].id,
        ],
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
        cwd=BASE_DIR,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    seen = json.loads(run.stdout.strip().splitlines()[-1])
    assert [binding for binding, _ in seen["interfaces"]] == ["HTTP+JSON", "JSONRPC", "JSONRPC"]
    for binding in ("HTTP+JSON", "JSONRPC"):
        assert seen[binding] == {
            "complete": DONE,
            # The question comes as a request for the user's input, with its text.
            "asked": ["Which market: EU or UK?"],
            "answered": {**DONE, "answer": "EU"},
            "same_task": True,
            # A failed task's answer is the agent's message, which says why.
            "failed": {"text": "The agent broke."},
            "streamed": DONE,
            "background_token": True,
            "polled": DONE,
            "polls": seen[binding]["polls"],
            "resubscribed": DONE,
        }, binding
        assert seen[binding]["polls"] >= 1
    # A run and a streamed run at each URL.
    assert (seen["url"], seen["agent_url"]) == ([DONE, DONE], [DONE, DONE])
    states = [task.state for task in Task.objects.all()]
    assert len(states) == 2 * 6 + 2 * 2
    assert states.count(TaskState.FAILED) == 2
    assert states.count(TaskState.COMPLETED) == 14
