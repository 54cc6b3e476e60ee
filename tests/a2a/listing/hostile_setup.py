"""What the tests of hostile and broken listings share: a scripted agent
(:mod:`tests.support.hostile_agent`) registered as agent-one, a user, a task sent to it,
and an agent marked "no listing" then cleared. The fixtures are imported by the test
modules that use them."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from a2a import creation
from a2a.listing_models import AgentListing
from a2a.models import Task
from a2a.worker import process_task
from agent_profiles.models import AgentProfile
from tests.a2a.listing.support import listed_now
from tests.support.hostile_agent import HostileAgent, hostile_agent

DONE = [{"artifactId": "a", "parts": [{"data": {"verdict": "pass"}}]}]


@pytest.fixture
def hostile() -> Iterator[HostileAgent]:
    with hostile_agent() as agent:
        yield agent


@pytest.fixture
def agent(make_skill: Any, make_agent: Any, hostile: HostileAgent) -> AgentProfile:
    skill = make_skill(id="ce-review")
    return make_agent(skills=[skill], a2a_endpoint=hostile.url, card_read_at=timezone.now())


@pytest.fixture
def user(agent: AgentProfile, make_user: Any) -> Any:
    return make_user()


def sent(user: Any, agent_id: str = "agent-one") -> Task:
    task = creation.create_task(
        skill_id="ce-review", input={"product": "lamp"}, user=user, agent_id=agent_id
    )
    process_task(task.pk)
    task.refresh_from_db()
    assert task.metadata["followedBy"] == "list"
    return task


def profile() -> AgentProfile:
    return AgentProfile.objects.get(pk="agent-one")


def cursor() -> AgentListing:
    return AgentListing.objects.get(pk="agent-one")


def mark_then_clear(how: str, agent: Any, hostile: HostileAgent) -> None:
    """One HTML answer marks the agent "no listing"; then it registers again (``how``:
    ``"register"``) or has its card read again (``"refresh"``), which clears the mark."""
    html = (200, {"Content-Type": "text/html"}, b"<html>maintenance</html>")
    hostile.list_handler = lambda query: html  # once: the agent's proxy, for a minute
    listed_now()
    assert not profile().listing
    hostile.list_handler = None
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {agent.raw_key}")
    if how == "register":
        fields = {"agentId": "agent-one", "skillIds": ["ce-review"], "a2aEndpoint": hostile.url}
        answer = client.post("/api/agent-profiles/register", fields, format="json")
    else:
        answer = client.post("/api/agent-profiles/agent-one/refresh")
    assert answer.status_code == 200, answer.content
