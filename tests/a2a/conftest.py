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

from a2a import agent_updates, creation
from a2a.agent_push_asgi import close_pool
from a2a.models import Task
from tests.support.agents import TestAgent, run_agent


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
    return creation.create_task(skill_id=skill.id, input={"product": "lamp"}, user=user)


@pytest.fixture
def pushed_task(
    transactional_db: None, make_skill: Any, make_agent: Any, make_user: Any
) -> Iterator[Task]:
    """A task sent once (attempt 1) whose agent task is ``agent-task-1``: what the push
    webhook's tests push to through the ASGI app (whose database threads are closed after,
    so the test database can go)."""
    skill = make_skill()
    make_agent(skills=[skill])
    created = creation.create_task(skill_id=skill.id, input={"product": "lamp"}, user=make_user())
    Task.objects.filter(pk=created.pk).update(attempts=1, remote_task_id="agent-task-1")
    created.refresh_from_db()
    yield created
    close_pool()
    asyncio.run(sync_to_async(connections.close_all, thread_sensitive=True)())


@pytest.fixture(scope="module")
def module_peer() -> Iterator[TestAgent]:
    """A real a2a-sdk agent for a whole module (started once; :func:`polled_user` resets
    what it recorded for each test)."""
    with run_agent() as agent:
        yield agent


@pytest.fixture
def polled_user(
    transactional_db: None,
    make_skill: Any,
    make_agent: Any,
    make_user: Any,
    module_peer: TestAgent,
    settings: Any,
) -> Any:
    """:func:`module_peer` registered for ``ce-review``, followed by polls one task at a
    time (listing off); the user who creates the tasks."""
    module_peer.reset()
    settings.ALLOW_LOOPBACK_URLS = True
    settings.A2A_LIST_INTERVAL = 0  # polled one by one, not by listings
    make_agent(skills=[make_skill(id="ce-review")], a2a_endpoint=module_peer.url)
    return make_user()


@pytest.fixture
def asked_task(make_skill: Any, make_agent: Any, make_user: Any) -> Task:
    """A task whose agent (``r-1`` in context ``c-1``) asks "EU or UK?": what the admin's
    reply form answers."""
    skill = make_skill()
    make_agent(skills=[skill])
    task = creation.create_task(skill_id=skill.id, input={"product": "lamp"}, user=make_user())
    question = {"messageId": "q1", "role": "ROLE_AGENT", "parts": [{"text": "EU or UK?"}]}
    agent_updates.apply_agent_update(
        task,
        status={"state": "TASK_STATE_INPUT_REQUIRED", "message": question},
        remote={"id": "r-1", "contextId": "c-1"},
        via="a2a",
    )
    return task
