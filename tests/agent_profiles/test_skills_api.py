from __future__ import annotations

from typing import Any

A2A_SKILL_FIELDS = {"id", "name", "description", "tags", "examples", "inputModes", "outputModes"}
SEED_FIELDS = {"skill_id", "version", "domain", "subdomain", "input_schema", "output_schema"}


def test_it_lists_active_skills_publicly_as_an_array(client: Any, make_skill: Any) -> None:
    make_skill(id="b-skill", input_modes=["application/json"])
    make_skill(id="a-skill")
    make_skill(id="retired", is_active=False)
    response = client.get("/api/a2a/skills")
    assert response.status_code == 200
    data = response.json()
    assert isinstance(data, list)
    assert [s["id"] for s in data] == ["a-skill", "b-skill"]
    item = data[1]
    assert set(item) == A2A_SKILL_FIELDS | SEED_FIELDS
    assert item["skill_id"] == "b-skill"
    assert item["inputModes"] == ["application/json"]
    assert item["input_schema"]["required"] == ["product"]
    assert item["domain"] == "compliance"


def test_it_ignores_a_bad_authorization_header_on_public_endpoints(
    client: Any, make_skill: Any
) -> None:
    make_skill()
    for path in ["/api/a2a/skills", "/api/a2a/agent-card"]:
        response = client.get(path, HTTP_AUTHORIZATION="Bearer a2a_nope_nope")
        assert response.status_code == 200


def test_it_returns_an_empty_array_without_skills(client: Any, db: None) -> None:
    assert client.get("/api/a2a/skills").json() == []


def test_skill_list_is_loadable_by_loadskills(client: Any, make_skill: Any, tmp_path: Any) -> None:
    """The list shape round-trips: GET output is valid loadskills input."""
    import json

    from django.core.management import call_command

    from agent_profiles.models import Skill

    make_skill(id="round-trip", tags=["x"], examples=["e1"])
    data = client.get("/api/a2a/skills").json()
    Skill.objects.all().delete()
    path = tmp_path / "skills.json"
    path.write_text(json.dumps(data))
    call_command("loadskills", str(path))
    assert Skill.objects.get().examples == ["e1"]


def test_discovery_endpoints_use_a_bounded_number_of_queries(
    client: Any, make_skill: Any, make_agent: Any, django_assert_max_num_queries: Any
) -> None:
    skills = [make_skill(id=f"s-{i}") for i in range(5)]
    for i in range(5):
        make_agent(id=f"agent-{i}", skills=skills)
    with django_assert_max_num_queries(1):
        client.get("/api/a2a/skills")
    with django_assert_max_num_queries(2):
        client.get("/api/a2a/agent-card")
    with django_assert_max_num_queries(2):
        client.get("/api/a2a/agent-card/agent-1")


def test_it_filters_skills_by_domain_subdomain_and_tag(client: Any, make_skill: Any) -> None:
    make_skill(id="ce", domain="compliance", subdomain="ce", tags=["eu"])
    make_skill(id="fda", domain="compliance", subdomain="fda", tags=["us"])
    make_skill(id="sum", domain="content", subdomain="nlp", tags=["eu", "text"])

    def ids(query: str) -> list[str]:
        return [s["id"] for s in client.get(f"/api/a2a/skills?{query}").json()]

    assert ids("domain=compliance") == ["ce", "fda"]
    assert ids("domain=compliance&subdomain=fda") == ["fda"]
    assert ids("tag=eu") == ["ce", "sum"]
    assert ids("tag=eu&domain=content") == ["sum"]
    assert ids("domain=nothing") == []
