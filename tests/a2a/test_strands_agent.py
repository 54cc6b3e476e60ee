"""The platform drives an agent built with AWS's Strands Agents, served by Strands' own
A2A server (a2a-sdk 0.3 JSON-RPC), end to end. What differs: the result is text streamed
token by token, appended to one artifact in chunks (read whole: JSON no chunk holds
alone); a task stays ``submitted`` while it runs; and a question is a Strands *interrupt*
that the agent resumes only on an ``interruptResponse`` naming the interrupt's id (a plain
answer is refused with -32602), so a person's answer is wrapped in that shape. The live
platform runs in this pass's mode. Slow: one test covering a lot."""

from __future__ import annotations

from typing import Any

import pytest

from a2a.models import Direction, TaskMessage
from a2a.services import cancel_task, reply_to_task
from a2a.states import TaskState
from tests.a2a.helpers import wait_for
from tests.a2a.test_agent_push_live import live
from tests.a2a.test_library_agents import ENV, check_outcomes, start
from tests.support.strands_agent import run_strands_agent

pytestmark = pytest.mark.slow


def test_a_strands_agent_completes_asks_fails_and_is_canceled(
    transactional_db: None, make_skill: Any, make_agent: Any, make_user: Any
) -> None:
    with run_strands_agent() as peer:
        make_agent(skills=[make_skill()], a2a_endpoint=peer.url)
        user = make_user()
        with live(**ENV):
            tasks = {name: start(user, name) for name in ("complete", "ask", "fail")}
            slow = wait_for(start(user, "slow", seconds=20), lambda t: bool(t.remote_task_id))
            cancel_task(slow, reason="no longer needed")
            asked = wait_for(tasks["ask"], lambda t: t.state == TaskState.INPUT_REQUIRED)
            question = asked.question
            reply_to_task(asked, text="EU")
            tasks = {name: wait_for(task, timeout=30) for name, task in tasks.items()}
            tasks["slow"] = wait_for(slow)
    check_outcomes(tasks, "poll")  # an A2A 0.3 agent: no ListTasks
    for task in tasks.values():
        assert task.attempts == 1
    assert len(tasks["complete"].artifacts[0]["parts"]) > 2  # the chunks, as streamed
    (interrupt,) = question["parts"][1]["data"]["interrupts"]
    assert interrupt["reason"] == "Which market: EU or UK?"
    sent = TaskMessage.objects.filter(task=tasks["ask"], direction=Direction.TO_AGENT)
    response = {"interruptId": interrupt["interruptId"], "response": "EU"}
    assert sent.order_by("id").last().message["parts"] == [
        {"data": {"interruptResponse": response}}
    ]


def test_an_answer_the_agent_refuses_goes_back_to_the_person(
    transactional_db: None, make_skill: Any, make_agent: Any, make_user: Any
) -> None:
    """A face client's answer naming an interrupt the agent is not waiting on: Strands
    refuses it (JSON-RPC -32602). The task waits for a person again, with the question and
    the agent's reason, instead of handing the reply to the gateway (as other refusals
    go) where it would wait for a connection this agent never makes; the next answer
    completes it."""
    with run_strands_agent() as peer:
        make_agent(skills=[make_skill()], a2a_endpoint=peer.url)
        user = make_user()
        waiting = lambda t: t.state == TaskState.INPUT_REQUIRED  # noqa: E731
        with live(**ENV):
            asked = wait_for(start(user, "ask"), waiting)
            question = asked.question
            wrong = {"interruptResponse": {"interruptId": "not-asked", "response": "EU"}}
            reply_to_task(asked, data=wrong)
            asked = wait_for(asked, lambda t: waiting(t) and t.error is not None, timeout=30)
            assert asked.question == question
            assert asked.error["code"] == "agent_refused"
            assert asked.error["message"].startswith("The agent refused the answer")
            assert "-32602" in asked.error["message"]
            assert asked.transport == "a2a"  # not handed to the gateway
            reply_to_task(asked, text="EU")
            done = wait_for(asked, timeout=30)
    assert (done.state, done.output) == (TaskState.COMPLETED, {"verdict": "pass", "answer": "EU"})
    assert done.error is None
