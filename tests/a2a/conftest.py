"""Fixtures shared by the dispatcher's tests: one skill, one agent offering it, a user
and a task of theirs, and a task the agent may push to. A module defining its own fixture
of the same name overrides these."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.db import connections

from a2a import services
from a2a.agent_push_asgi import close_pool
from a2a.models import Task


@pytest.fixture
def skill(make_skill: Any) -> Any:
    return make_skill()


@pytest.fixture
def agent(make_agent: Any, skill: Any) -> Any:
    return make_agent(skills=[skill])


@pytest.fixture
def user(make_user: Any) -> Any:
    return make_user()


@pytest.fixture
def task(skill: Any, agent: Any, user: Any) -> Task:
    return services.create_task(skill_id=skill.id, input={"product": "lamp"}, user=user)


@pytest.fixture
def pushed_task(
    transactional_db: None, make_skill: Any, make_agent: Any, make_user: Any
) -> Iterator[Task]:
    """A task sent once (attempt 1) whose agent task is ``agent-task-1``: what the push
    webhook's tests push to through the ASGI app (whose database threads are closed after,
    so the test database can go)."""
    skill = make_skill()
    make_agent(skills=[skill])
    created = services.create_task(skill_id=skill.id, input={"product": "lamp"}, user=make_user())
    Task.objects.filter(pk=created.pk).update(attempts=1, remote_task_id="agent-task-1")
    created.refresh_from_db()
    yield created
    close_pool()
    asyncio.run(sync_to_async(connections.close_all, thread_sensitive=True)())
