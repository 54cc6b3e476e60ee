"""Loading one skills file several times at once (three operators, or a deploy script run
twice): each load says what it created and what it updated, together exactly once each."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from django.db import connection

from agent_profiles.models import Skill
from agent_profiles.skills import SkillLoadResult, load_skills

COUNT = 300


def skills() -> list[dict[str, Any]]:
    return [
        {
            "id": f"ops-skill-{i}",
            "name": f"Skill {i}",
            "description": "Loaded three times at once.",
            "input_schema": {"type": "object"},
            "output_schema": {"type": "object"},
        }
        for i in range(COUNT)
    ]


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_concurrent_loads_of_a_new_file_create_each_skill_once() -> None:
    start = threading.Barrier(3)
    results: list[SkillLoadResult] = []
    errors: list[BaseException] = []

    def load() -> None:
        try:
            start.wait(10)
            results.append(load_skills(skills()))
        except BaseException as exc:  # reported below, not lost in the thread
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=load) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert not errors, errors
    assert Skill.objects.filter(pk__startswith="ops-skill-").count() == COUNT
    # Before, each load read "none exists" before the others committed: 3 x 300 created.
    assert sum(len(r.created) for r in results) == COUNT
    assert sorted(len(r.created) + len(r.updated) for r in results) == [COUNT] * 3
