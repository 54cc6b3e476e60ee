"""Fixtures shared by the dispatcher's tests: one skill, one agent offering it, a user
and a task of theirs. A module defining its own fixture of the same name overrides these."""

from __future__ import annotations

from typing import Any

import pytest

from a2a import services
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
