"""The platform drives an agent served by LangGraph's own server (the A2A endpoint of
LangGraph deployments), end to end: its ``SendMessage`` ignores ``returnImmediately`` and
answers when the run ends or asks, so a send of a long task outlasts A2A_HTTP_TIMEOUT;
the platform waits for that one (not sending it again), marks the agent and starts its
later sends by a stream, which names the task at once. Its
``GetTask`` and ``ListTasks`` keep the result in the task's last message, not in an
artifact. The live platform runs in this pass's mode. Slow: two tests covering a lot."""

from __future__ import annotations

from typing import Any

import pytest

from a2a.services import reply_to_task
from a2a.states import TaskState
from tests.a2a.helpers import wait_for
from tests.a2a.test_agent_push_live import live
from tests.a2a.test_library_agents import ENV, check_outcomes, start, the_four_behaviours
from tests.support.langgraph_agent import run_langgraph_agent

pytestmark = pytest.mark.slow


def test_an_agent_that_holds_its_sends_is_found_out_and_sent_by_stream(
    transactional_db: None, make_skill: Any, make_agent: Any, make_user: Any
) -> None:
    with run_langgraph_agent() as peer:
        agent = make_agent(skills=[make_skill()], a2a_endpoint=peer.url)
        user = make_user()
        with live(**{**ENV, "A2A_HTTP_TIMEOUT": 2}):
            quick = wait_for(start(user, "complete"), timeout=30)
            agent.refresh_from_db()
            assert agent.early_return  # answered within the timeout: nothing to learn
            slow = wait_for(start(user, "slow", seconds=4), timeout=60)
            after = wait_for(start(user, "slow", seconds=3), timeout=60)
            # Its question is the value given to interrupt(), in an "Interrupt" artifact.
            asked = start(user, "ask")
            asked = wait_for(asked, lambda t: t.state == TaskState.INPUT_REQUIRED, timeout=30)
            question = asked.question
            reply_to_task(asked, text="EU")
            asked = wait_for(asked, timeout=30)
        runs = peer.runs()
    agent.refresh_from_db()
    for task in (quick, slow, after):
        assert (task.state, task.output) == (TaskState.COMPLETED, {"verdict": "pass"})
    assert not agent.early_return
    assert "returnImmediately" in agent.no_early_return_reason
    assert "2 s (A2A_HTTP_TIMEOUT)" in agent.no_early_return_reason
    # The send that found the hold out was waited for, not sent again (a2a.send_watch:
    # the sweep, which takes these tasks, hands such sends to the threads that start
    # tasks); every send after starts by a stream. Each task ran once at the agent.
    assert (quick.attempts, slow.attempts, after.attempts) == (1, 1, 1)
    assert question["parts"][0]["data"]["value"] == "Which market: EU or UK?"
    assert (asked.state, asked.output) == (TaskState.COMPLETED, {"verdict": "pass", "answer": "EU"})
    # One run per task (before, the send sent again ran as one more); the question's
    # thread has a second, the answer's.
    assert sorted(runs.values()) == [["success"]] * 3 + [["success", "success"]]


def test_each_task_runs_once_at_an_agent_that_holds_its_sends(
    transactional_db: None, make_skill: Any, make_agent: Any, make_user: Any
) -> None:
    """Complete, ask and answer, fail, cancel while working: each a run of its own at the
    agent (the answer a second run on the question's thread), the result read from the
    task's last message, the cancel reaching the run."""
    with run_langgraph_agent() as peer:
        # As the test above leaves it: found to hold its sends.
        make_agent(skills=[make_skill()], a2a_endpoint=peer.url, early_return=False)
        user = make_user()
        with live(**ENV):
            tasks = the_four_behaviours(user)
            # Canceled here at once; the agent is told after (a race the test must not lose).
            told = lambda t: "remoteCancel" in t.metadata  # noqa: E731
            tasks["slow"] = wait_for(tasks["slow"], told, timeout=30)
        runs = peer.runs()
    check_outcomes(tasks, "list")
    assert tasks["slow"].metadata["remoteCancel"]["state"] == TaskState.CANCELED
    expected = [["error"], ["interrupted"], ["success"], ["success", "success"]]
    assert sorted(runs.values()) == expected
    for task in tasks.values():
        assert task.attempts == 1
