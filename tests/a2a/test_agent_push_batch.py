"""Pushes that arrive together are applied together (a2a/agent_push_batch.py): one
transaction for the batch, a savepoint per push, each push's answer its own."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from asgiref.sync import sync_to_async
from django.db import connections

from a2a import agent_push, agent_push_batch, services
from a2a.agent_push_asgi import close_pool
from a2a.models import Task
from a2a.states import TaskState
from platform_site.asgi import application

COUNT = 8


@pytest.fixture
def tasks(
    transactional_db: None, make_skill: Any, make_agent: Any, make_user: Any, settings: Any
) -> Iterator[list[Task]]:
    settings.AGENT_PUSH_THREADS = 1  # one drain: what arrives meanwhile waits for the next
    skill = make_skill()
    make_agent(skills=[skill])
    user = make_user()
    made = []
    for n in range(COUNT):
        task = services.create_task(skill_id=skill.id, input={"product": "lamp"}, user=user)
        Task.objects.filter(pk=task.pk).update(attempts=1, remote_task_id=f"agent-task-{n}")
        made.append(task)
    yield made
    close_pool()
    asyncio.run(sync_to_async(connections.close_all, thread_sensitive=True)())


def working(n: int, timestamp: str = "2026-12-01T10:00:02Z") -> dict[str, Any]:
    update = {"taskId": f"agent-task-{n}", "status": {"state": "TASK_STATE_WORKING"}}
    update["status"]["timestamp"] = timestamp
    return {"statusUpdate": update}


async def post_all(bodies: list[tuple[Task, Any]]) -> list[httpx.Response]:
    transport = httpx.ASGITransport(app=application)
    async with httpx.AsyncClient(transport=transport, base_url="http://testserver") as client:
        return await asyncio.gather(
            *(
                client.post(
                    f"/api/a2a/push/{task.pk}/1",
                    content=json.dumps(body),
                    headers={"X-A2A-Notification-Token": agent_push.token_for(task.pk, 1)},
                )
                for task, body in bodies
            )
        )


def test_a_burst_is_applied_in_batches_and_one_refusal_stays_its_own(
    tasks: list[Task], monkeypatch: pytest.MonkeyPatch
) -> None:
    sizes: list[int] = []
    real = agent_push_batch.apply_batch

    def counted(items: list[Any]) -> list[Any]:
        sizes.append(len(items))
        return real(items)

    monkeypatch.setattr(agent_push_batch, "apply_batch", counted)
    # The last task is told about another agent task than the one it follows: a 409 for
    # that push alone, inside a batch whose other pushes apply.
    wrong = {"statusUpdate": {"taskId": "someone-else", "status": {"state": "TASK_STATE_WORKING"}}}
    bodies = [(task, working(n)) for n, task in enumerate(tasks[:-1])] + [(tasks[-1], wrong)]
    responses = asyncio.run(post_all(bodies))
    assert [r.status_code for r in responses[:-1]] == [200] * (COUNT - 1)
    assert responses[-1].status_code == 409, responses[-1].text
    assert responses[-1].json()["error"]["code"] == "wrong_task"
    assert sum(sizes) == COUNT  # none lost
    assert max(sizes) > 1  # batched
    states = [Task.objects.get(pk=t.pk).state for t in tasks]
    assert states == [TaskState.WORKING] * (COUNT - 1) + [TaskState.SUBMITTED]
