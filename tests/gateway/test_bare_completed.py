"""A COMPLETED that carries no artifacts keeps the ones the agent reported before, and the
task is judged on them: on the gateway, and on every other path through the one mapping
(:func:`a2a.agent_updates.apply_agent_update`).

Why: an a2a-sdk ``TaskUpdater`` adds its artifact (a WORKING update with it), then
completes (a bare COMPLETED). Over the gateway that COMPLETED erased the stored
artifacts, read its output as None and failed the task ``output_invalid`` ("None is not
of type 'object'"); only the push path kept them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from a2a import agent_updates
from a2a.models import Task
from a2a.states import TaskState, Transport
from agent_profiles.models import AgentProfile
from tests.gateway.conftest import db_async, open_client
from tests.gateway.test_consumer import ping_pong

REPORTED = [{"artifactId": "a", "parts": [{"data": {"verdict": "pass"}}]}]


async def update(client: Any, task: Task, state: str, **extra: Any) -> Task:
    """Send a ``task.update``; the task once it was applied."""
    await client.send(
        {"type": "task.update", "taskId": str(task.id), "status": {"state": state}, **extra}
    )
    await ping_pong(client)  # the update was applied before the pong
    return await db_async(Task.objects.get)(pk=task.pk)


@pytest.mark.anyio
@pytest.mark.django_db(transaction=True)
async def test_a_bare_completed_after_artifacts_completes_with_them(
    agent: AgentProfile, make_task: Callable[..., Task]
) -> None:
    """The order a2a-sdk's TaskUpdater uses: add_artifact (WORKING with it), complete. An
    update that brings artifacts still replaces those before (a draft here)."""
    task = await db_async(make_task)(transport=Transport.WEBSOCKET)
    client = await open_client(agent.raw_key)
    draft = [{"artifactId": "draft", "parts": [{"data": {"verdict": "maybe"}}]}]
    await update(client, task, "TASK_STATE_WORKING", artifacts=draft)
    working = await update(client, task, "TASK_STATE_WORKING", artifacts=REPORTED)
    assert working.artifacts == REPORTED
    done = await update(client, task, "TASK_STATE_COMPLETED")
    assert (done.state, done.output, done.artifacts, done.error) == (
        TaskState.COMPLETED,
        {"verdict": "pass"},
        REPORTED,
        None,
    )
    await client.close()


@pytest.mark.anyio
@pytest.mark.django_db(transaction=True)
async def test_a_bare_completed_is_judged_on_the_artifacts_reported_before(
    agent: AgentProfile, make_task: Callable[..., Task]
) -> None:
    """The stored artifacts are validated as if the COMPLETED had carried them: an output
    that fails the skill's ``output_schema`` fails the task, and they stay for a person
    to see."""
    task = await db_async(make_task)(transport=Transport.WEBSOCKET)
    client = await open_client(agent.raw_key)
    invalid = [{"artifactId": "a", "parts": [{"data": {"verdict": "maybe"}}]}]
    await update(client, task, "TASK_STATE_WORKING", artifacts=invalid)
    done = await update(client, task, "TASK_STATE_COMPLETED", artifacts=[])
    assert (done.state, done.error["code"]) == (TaskState.FAILED, "output_invalid")
    assert done.error["details"]["output"] == {"verdict": "maybe"}
    assert done.artifacts == invalid
    await client.close()


@pytest.mark.django_db
@pytest.mark.parametrize("via", ["a2a", "stream", "list"])
def test_every_path_keeps_the_artifacts_a_bare_completed_does_not_carry(
    make_task: Callable[..., Task], via: str
) -> None:
    """One rule for all: a poll's, a stream's or a listing's COMPLETED Task without
    artifacts (after a WORKING that brought them) completes with the stored ones."""
    task = make_task(transport=Transport.A2A)
    remote = {"id": "r-1", "contextId": "c-1"}
    working = {**remote, "status": {"state": "TASK_STATE_WORKING"}, "artifacts": REPORTED}
    agent_updates.apply_agent_reply(task, task_json=working, message=None, via=via)
    completed = {**remote, "status": {"state": "TASK_STATE_COMPLETED"}}
    agent_updates.apply_agent_reply(task, task_json=completed, message=None, via=via)
    task.refresh_from_db()
    assert (task.state, task.output, task.artifacts) == (
        TaskState.COMPLETED,
        {"verdict": "pass"},
        REPORTED,
    )
