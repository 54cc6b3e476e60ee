"""The skill and agent editors hold their JSON fields to the REST API's text and depth rule:
a NUL, a lone surrogate, NaN or JSON nested past the limit is an error under the field
(PostgreSQL used to answer the NUL with a DataError, a 500; SQLite stored it; the deep
value was a RecursionError on both), and the page shows the input again as typed."""

from __future__ import annotations

from typing import Any

import pytest
from django.utils.html import escape

from agent_profiles.models import Skill

DEEP = 100_000
NESTED = "[" * DEEP + "]" * DEEP

BAD_JSON = [
    ('{"type": "object", "description": "a\\u0000b"}', "description contains a NUL character"),
    ('{"type": "object", "description": "\\udc00"}', "description contains a lone surrogate"),
    ('{"type": "object", "\\u0000": {}}', "a key contains a NUL character"),
    ('{"type": "object", "default": ' + NESTED + "}", "nested deeper than 64 levels"),
    ('{"type": "object", "maximum": Infinity}', "Enter a valid JSON"),
]
IDS = ["nul", "lone-surrogate", "nul-key", "deep", "infinity"]


def skill_form(**fields: str) -> dict[str, str]:
    form = {
        "id": "new-skill",
        "name": "New",
        "version": "1.0.0",
        "tags": "[]",
        "examples": "[]",
        "input_modes": "[]",
        "output_modes": "[]",
        "input_schema": '{"type": "object"}',
        "output_schema": '{"type": "object"}',
        "max_attempts": "3",
    }
    return {**form, **fields}


@pytest.mark.parametrize(("value", "said"), BAD_JSON, ids=IDS)
@pytest.mark.parametrize("field", ["input_schema", "output_schema"])
def test_a_skill_schema_the_api_would_refuse_is_an_error_on_its_field(
    staff_client: Any, field: str, value: str, said: str
) -> None:
    response = staff_client.post("/admin/agent_profiles/skill/add/", skill_form(**{field: value}))
    assert response.status_code == 200  # the form again, not a redirect
    assert said in response.context["adminform"].form.errors[field][0]
    assert escape(value[:30]) in response.content.decode()  # shown as typed
    assert not Skill.objects.exists()


def test_the_skills_other_json_fields_hold_to_the_rule(staff_client: Any) -> None:
    form = skill_form(tags='["a\\u0000"]', examples=NESTED, input_modes='["\\ud800"]')
    response = staff_client.post("/admin/agent_profiles/skill/add/", form)
    assert response.status_code == 200
    errors = response.context["adminform"].form.errors
    assert set(errors) == {"tags", "examples", "input_modes"}
    assert not Skill.objects.exists()


@pytest.mark.parametrize(("value", "said"), BAD_JSON, ids=IDS)
def test_an_agents_metadata_the_api_would_refuse_is_an_error_on_the_field(
    staff_client: Any, make_agent: Any, value: str, said: str
) -> None:
    agent = make_agent(metadata={"team": "ops"})
    response = staff_client.post(
        f"/admin/agent_profiles/agentprofile/{agent.pk}/change/",
        {
            "id": agent.pk,
            "name": "x",
            "status": "active",
            "metadata": value,
            "api_keys-TOTAL_FORMS": "0",
            "api_keys-INITIAL_FORMS": "0",
        },
    )
    assert response.status_code == 200
    assert said in response.context["adminform"].form.errors["metadata"][0]
    agent.refresh_from_db()
    assert agent.metadata == {"team": "ops"}
