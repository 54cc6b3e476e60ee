"""What the reassign tests share: two agents of the skill, a task at the first, and the
REST API as its user."""

from __future__ import annotations

from typing import Any

import pytest
from rest_framework.test import APIClient

from a2a import creation
from a2a.models import Task
from tests.a2a.test_api import client_for


@pytest.fixture
def two(make_agent: Any, skill: Any) -> tuple[Any, Any]:
    return (
        make_agent(skills=[skill]),
        make_agent(skills=[skill], id="agent-two", a2a_endpoint="http://127.0.0.1:9/two"),
    )


@pytest.fixture
def task(skill: Any, two: Any, user: Any) -> Task:
    return creation.create_task(
        skill_id=skill.id, input={"product": "lamp"}, agent_id="agent-one", user=user
    )


@pytest.fixture
def api(user: Any) -> APIClient:
    return client_for(user)
