"""A skill's ``output_schema`` edited while one of its tasks runs: the result is judged by
the schema as it is when the COMPLETED arrives (docs/dispatch.md, COMPLETED; seen within
``A2A_REGISTRY_CACHE_SECONDS`` of an edit), on every path alike: never by the copy of
the skill a worker's claim read with the task, which a stream or a held send keeps for
as long as the agent's task lasts."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
from django.db import connection
from starlette.responses import Response, StreamingResponse

from a2a import agent_updates, creation, rows
from a2a.models import Task
from a2a.states import TaskState
from agent_profiles.models import Skill
from tests.a2a.helpers import working
from tests.support.scripted_agent import COMPLETED, WORKING, refused, run_out, scripted_agent, start

pytestmark = pytest.mark.django_db(transaction=True)

# The new schema: the agent's {"verdict": "pass"} no longer fits it.
NEW_SCHEMA = {"type": "object", "required": ["score"], "properties": {"score": {"type": "integer"}}}
ARTIFACT = {"artifactId": "a", "parts": [{"data": {"verdict": "pass"}}]}


@pytest.fixture(autouse=True)
def _settings(settings: Any) -> None:
    settings.ALLOW_LOOPBACK_URLS = True
    settings.A2A_REGISTRY_CACHE_SECONDS = 0.0  # an edit elsewhere is seen at once


def edit_schema_elsewhere() -> None:
    """Edit the schema as another process would: a bulk update, no signal to this
    process's registry cache."""
    Skill.objects.filter(pk="ce-review").update(output_schema=NEW_SCHEMA)
    connection.close()  # this thread's (the agent's) connection


def test_a_streamed_result_is_judged_by_the_schema_edited_while_it_ran(
    make_agent: Any, make_skill: Any, make_user: Any
) -> None:
    first = {"task": {"id": "t1", "contextId": "c", "status": {"state": WORKING}}}
    artifact = {"artifactUpdate": {"taskId": "t1", "contextId": "c", "artifact": ARTIFACT}}
    done = {"statusUpdate": {"taskId": "t1", "contextId": "c", "status": {"state": COMPLETED}}}

    def answer(kind: str, body: Any) -> Response:
        if kind != "stream":
            return refused()

        async def chunks() -> AsyncIterator[bytes]:
            yield b"data: " + json.dumps(first).encode() + b"\n\n"
            await asyncio.to_thread(edit_schema_elsewhere)  # while the stream is open
            for event in (artifact, done):
                yield b"data: " + json.dumps(event).encode() + b"\n\n"

        return StreamingResponse(chunks(), media_type="text/event-stream")

    with scripted_agent(make_agent, make_skill, "HTTP+JSON", stream=True) as agent:
        agent.answer = answer
        task = run_out(start(make_user()))
    assert task.state == TaskState.FAILED, task.error
    assert task.error["code"] == "output_invalid"
    assert "score" in task.error["message"]


def test_a_task_read_with_its_skill_is_judged_by_the_schema_as_it_is_now(
    make_agent: Any, make_skill: Any, make_user: Any
) -> None:
    """The claim's joined read (rows.TASKS_FOR_WORK) carries the skill as it was then."""
    skill = make_skill()
    make_agent(skills=[skill])
    created = creation.create_task(skill_id=skill.id, input={"product": "lamp"}, user=make_user())
    working(created)
    task = rows.task_for_work(created.pk)
    assert task is not None
    assert Task.skill.is_cached(task)
    Skill.objects.filter(pk=skill.pk).update(output_schema=NEW_SCHEMA)
    agent_updates.apply_agent_update(
        task, status={"state": COMPLETED}, artifacts=[ARTIFACT], via="a2a"
    )
    task.refresh_from_db()
    assert (task.state, task.error["code"]) == (TaskState.FAILED, "output_invalid")
