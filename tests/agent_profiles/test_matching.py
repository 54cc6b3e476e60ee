"""The matcher: documented score terms, deterministic tie-break, clear error."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.core.cache import cache
from django.utils import timezone

from a2a.models import Task
from a2a.states import TaskState
from agent_profiles.exceptions import NoAgentAvailable
from agent_profiles.matching import MATCH_WINDOW, WEIGHTS, match_agent, score_agents
from gateway import presence

pytestmark = pytest.mark.django_db

COMPLETED, FAILED, CANCELED, REJECTED = (
    TaskState.COMPLETED,
    TaskState.FAILED,
    TaskState.CANCELED,
    TaskState.REJECTED,
)


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


# --- only what the agent answers for counts (a2a.match_stats) ------------------------


def _finish(skill: Any, agent: Any, n: int, state: str, **fields: Any) -> None:
    """``n`` tasks of ``agent`` that ended in ``state`` an hour ago, 5 s after creation."""
    end = timezone.now() - timedelta(hours=1)
    for i in range(n):
        Task.objects.create(
            skill=skill,
            agent=agent,
            state=state,
            created_at=end - timedelta(seconds=5 + i),
            state_changed_at=end - timedelta(seconds=i),
            **fields,
        )


def _rows(skill: Any) -> dict[str, dict[str, Any]]:
    cache.clear()  # the matcher's history cache
    return {r["agentId"]: r for r in score_agents(skill)}


def test_an_agents_own_tasks_do_not_count(make_agent: Any, skill: Any) -> None:
    """An agent is a caller too (its key on the A2A face): the tasks it sent itself and
    completed at once won it the match over an agent with a real record."""
    _finish(skill, make_agent(id="a-proven", skills=[skill]), 20, COMPLETED)
    selfish = make_agent(id="b-selfish", skills=[skill])
    _finish(skill, selfish, 50, COMPLETED, created_by_agent=selfish)
    rows = _rows(skill)
    assert rows["b-selfish"]["finishedTasks"] == 0
    assert rows["b-selfish"]["terms"]["success"] == 0.5
    assert match_agent(skill)[0].id == "a-proven"


def _offline(status: int) -> dict[str, Any]:
    """The details of a refused send that waited offline in vain (a2a.deadlines)."""
    refusal = {"code": "agent_refused", "details": {"httpStatus": status}}
    return {"lastAnswer": refusal, "waitedOffline": True}


@pytest.mark.parametrize(
    ("state", "error"),
    [
        (CANCELED, None),  # a caller's (or a person's) cancel
        (FAILED, {"code": "agent_refused", "details": {"httpStatus": 400}}),  # bad input
        (FAILED, {"code": "agent_refused", "details": {"httpStatus": 413}}),  # too large
        (FAILED, {"code": "agent_refused", "details": None}),  # a JSON-RPC error
        (FAILED, {"code": "agent_inactive", "details": None}),  # an operator's
        (FAILED, {"code": "internal_error", "details": None}),  # the platform's
        (FAILED, {"code": "agent_refused", "details": _offline(400)}),  # waited offline
    ],
    ids=[
        "canceled",
        "refused-400",
        "refused-413",
        "refused-jsonrpc",
        "inactive",
        "internal",
        "refused-400-offline",
    ],
)
def test_outcomes_the_agent_does_not_answer_for_do_not_count(
    make_agent: Any, make_user: Any, skill: Any, state: str, error: Any
) -> None:
    """A caller sending a rival tasks and cancelling them (or sending input it refuses)
    sank the rival's success from 0.95 to 0.21."""
    agent = make_agent(id="a-agent", skills=[skill])
    _finish(skill, agent, 20, COMPLETED)
    before = _rows(skill)["a-agent"]["terms"]["success"]
    _finish(skill, agent, 40, state, created_by=make_user("mallory"), error=error)
    after = _rows(skill)["a-agent"]
    assert after["terms"]["success"] == before
    assert after["finishedTasks"] == 20


@pytest.mark.parametrize(
    ("state", "error"),
    [
        (FAILED, {"code": "agent_failed", "details": None}),
        (FAILED, {"code": "output_invalid", "details": None}),
        (FAILED, {"code": "timeout", "details": None}),
        (FAILED, {"code": "agent_refused", "details": {"httpStatus": 404}}),  # wrong route
        (FAILED, {"code": "agent_unreachable", "details": None}),
        (REJECTED, {"code": "rejected", "details": None}),
        # a refused send waits offline for the gateway; its end keeps the refusal as its
        # last answer (a2a.deadlines): a 404 is the agent's still
        (FAILED, {"code": "agent_refused", "details": _offline(404)}),
        (FAILED, {"code": "agent_refused", "details": _offline(431)}),  # our headers
    ],
    ids=[
        "agent_failed",
        "output_invalid",
        "timeout",
        "refused-404",
        "unreachable",
        "rejected",
        "refused-404-offline",
        "refused-431-offline",
    ],
)
def test_the_agents_own_failures_still_count(
    make_agent: Any, skill: Any, state: str, error: Any
) -> None:
    agent = make_agent(id="a-agent", skills=[skill])
    _finish(skill, agent, 4, state, error=error)
    row = _rows(skill)["a-agent"]
    assert row["finishedTasks"] == 4
    assert row["terms"]["success"] == round(1 / 6, 4)


def test_each_agent_keeps_its_own_window(make_agent: Any, make_user: Any, skill: Any) -> None:
    """One shared limit over all candidates, newest first, let a busy agent's newer tasks
    push every other agent's history out of the window."""
    quiet = make_agent(id="a-quiet", skills=[skill])
    busy = make_agent(id="b-busy", skills=[skill])
    _finish(skill, quiet, MATCH_WINDOW, COMPLETED)
    user = make_user("carol")
    now = timezone.now()
    for i in range(2 * MATCH_WINDOW):  # all newer than the quiet agent's
        end = now - timedelta(seconds=i)
        Task.objects.create(
            skill=skill,
            agent=busy,
            created_by=user,
            state=FAILED,
            error={"code": "agent_failed", "details": None},
            created_at=end - timedelta(seconds=1),
            state_changed_at=end,
        )
    rows = _rows(skill)
    assert rows["a-quiet"]["finishedTasks"] == MATCH_WINDOW
    assert rows["b-busy"]["finishedTasks"] == MATCH_WINDOW
    assert rows["a-quiet"]["terms"]["success"] == round((MATCH_WINDOW + 1) / (MATCH_WINDOW + 2), 4)
    assert match_agent(skill)[0].id == "a-quiet"
