"""The matcher: documented score terms, deterministic tie-break, clear error."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from a2a.models import Task
from agent_profiles.exceptions import NoAgentAvailable
from agent_profiles.matching import WEIGHTS, match_agent
from gateway import presence

pytestmark = pytest.mark.django_db


@pytest.fixture
def skill(make_skill: Any) -> Any:
    return make_skill()


def test_it_breaks_ties_by_agent_id(make_agent: Any, skill: Any) -> None:
    make_agent(id="b-agent", skills=[skill])
    make_agent(id="a-agent", skills=[skill])
    agent, breakdown = match_agent(skill)
    assert agent.id == "a-agent"
    assert [c["agentId"] for c in breakdown["candidates"]] == ["a-agent", "b-agent"]
    assert breakdown["weights"] == WEIGHTS
    assert abs(sum(WEIGHTS.values()) - 1.0) < 1e-9


def test_domain_fit_wins(make_agent: Any, skill: Any) -> None:
    make_agent(id="a-agent", skills=[skill], domain="finance")
    make_agent(id="z-agent", skills=[skill], domain="compliance", subdomain="ce_certification")
    agent, breakdown = match_agent(skill)
    assert agent.id == "z-agent"
    assert breakdown["terms"]["fit"] == 1.0


def test_load_and_success_count(make_agent: Any, skill: Any) -> None:
    busy = make_agent(id="a-busy", skills=[skill])
    make_agent(id="b-idle", skills=[skill])
    for _ in range(3):
        Task.objects.create(skill=skill, agent=busy)
    agent, _ = match_agent(skill)
    assert agent.id == "b-idle"


def test_a_failing_agent_loses_to_a_reliable_one(make_agent: Any, skill: Any) -> None:
    flaky = make_agent(id="a-flaky", skills=[skill])
    good = make_agent(id="b-good", skills=[skill])
    now = timezone.now()
    for agent, ok in ((flaky, False), (good, True)):
        for _ in range(4):
            task = Task.objects.create(
                skill=skill, agent=agent, created_at=now - timedelta(seconds=5)
            )
            if ok:
                task.complete({"verdict": "pass"}, [])
            else:
                task.fail("agent_failed", "boom")
    agent, breakdown = match_agent(skill)
    assert agent.id == "b-good"
    assert breakdown["terms"]["success"] > 0.8


def test_online_presence_counts(make_agent: Any, skill: Any) -> None:
    make_agent(id="a-agent", skills=[skill])
    make_agent(id="b-agent", skills=[skill])
    presence.register("b-agent", "specific.test!b")  # a real presence row
    agent, breakdown = match_agent(skill)
    assert agent.id == "b-agent"
    assert breakdown["terms"]["online"] == 1.0


def test_inactive_agents_are_not_candidates(make_agent: Any, skill: Any) -> None:
    make_agent(id="a-agent", skills=[skill], status="disabled")
    with pytest.raises(NoAgentAvailable):
        match_agent(skill)


def test_a_healthy_agent_is_preferred(make_agent: Any, skill: Any) -> None:
    make_agent(id="a-agent", skills=[skill])
    make_agent(id="b-agent", skills=[skill], health_status="healthy")
    agent, breakdown = match_agent(skill)
    assert agent.id == "b-agent"
    assert breakdown["terms"]["online"] == 1.0


def test_an_agent_known_unreachable_is_not_picked_while_another_can_take_the_task(
    make_agent: Any, skill: Any
) -> None:
    make_agent(
        id="a-down",
        skills=[skill],
        domain="compliance",
        subdomain="ce_certification",
        health_status="unhealthy",
        health_error="ConnectError",
    )
    make_agent(id="b-fresh", skills=[skill], domain="finance")
    agent, breakdown = match_agent(skill)
    assert agent.id == "b-fresh"
    assert [c["agentId"] for c in breakdown["candidates"]] == ["b-fresh"]


def test_an_agent_whose_calls_fail_auth_is_avoided(make_agent: Any, skill: Any) -> None:
    from agent_profiles.health import record_call_outcome

    bad = make_agent(id="a-bad-creds", skills=[skill], health_status="healthy")
    make_agent(id="b-agent", skills=[skill])
    record_call_outcome(bad, ok=False, code="agent_auth_failed", message="HTTP 401")
    assert match_agent(skill)[0].id == "b-agent"


def test_gateway_presence_counts_as_reachable(make_agent: Any, skill: Any) -> None:
    make_agent(id="a-socket", skills=[skill], health_status="unhealthy")
    make_agent(id="b-agent", skills=[skill])
    presence.register("a-socket", "specific.test!a")
    agent, breakdown = match_agent(skill)
    assert agent.id == "a-socket"
    assert breakdown["terms"]["online"] == 1.0


def test_when_every_agent_is_unreachable_one_is_still_picked(make_agent: Any, skill: Any) -> None:
    make_agent(id="a-down", skills=[skill], health_status="unhealthy")
    make_agent(id="b-down", skills=[skill], health_status="unhealthy")
    agent, breakdown = match_agent(skill)
    assert agent.id == "a-down"
    assert breakdown["terms"]["online"] == 0.0
