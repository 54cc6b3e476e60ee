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
from a2a.states import TaskState
from a2a.task_actions import cancel_task, reply_to_task
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
