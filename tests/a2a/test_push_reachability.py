"""An agent is asked to push only when it can reach the webhook: with ``PUBLIC_URL`` at a
loopback address (its default) and the agent elsewhere, its pushes could never arrive and
its tasks would be seen ending only at the safety-net polls, a minute late. Such an agent
is followed like one that does not push, and the log says why, once."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

import pytest

from a2a import agent_push_tokens, creation, worker
from a2a.models import Task
from a2a.states import TaskState
from agent_profiles.interfaces import CallTarget
from agent_profiles.urlguard import names_this_machine_only, use_resolver
from tests.support.push_agents import PushAgent, run_push_agent


@pytest.mark.parametrize(
    ("host", "only_here"),
    [
        ("localhost", True),
        ("api.localhost", True),
        ("127.0.0.1", True),
        ("127.1", True),
        ("[::1]", True),
        ("::1", True),
        ("0.0.0.0", True),
        ("platform.example.com", False),
        ("10.0.0.7", False),
        ("203.0.113.9", False),
    ],
)
def test_which_hosts_name_this_machine_only(host: str, only_here: bool) -> None:
    assert names_this_machine_only(host) is only_here


@pytest.fixture
def fresh_warnings() -> Iterator[None]:
    agent_push_tokens._warned.clear()
    yield
    agent_push_tokens._warned.clear()


@pytest.mark.parametrize(
    ("public", "agent", "reachable"),
    [
        ("http://127.0.0.1:8000", "http://agents.example.com:9000", False),
        ("http://localhost:8000", "http://10.0.0.7/a2a", False),
        ("http://0.0.0.0:8000", "https://agents.example.com", False),
        ("http://127.0.0.1:8000", "http://127.0.0.1:9000", True),
        ("http://127.0.0.1:8000", "http://localhost:9000", True),
        ("https://platform.example.com", "https://agents.example.com", True),
        ("http://10.0.0.2:8000", "http://10.0.0.7:9000", True),
    ],
)
def test_the_webhook_is_reachable_unless_only_this_machine_can_reach_it(
    settings: Any, fresh_warnings: None, public: str, agent: str, reachable: bool
) -> None:
    settings.PUBLIC_URL = public
    target = CallTarget(agent_id="far", url=agent, push_notifications=True)
    assert agent_push_tokens.webhook_reachable(target) is reachable


def test_the_log_says_why_once_per_agent(
    settings: Any, fresh_warnings: None, caplog: pytest.LogCaptureFixture
) -> None:
    settings.PUBLIC_URL = "http://127.0.0.1:8000"
    target = CallTarget(agent_id="far", url="http://agents.example.com", push_notifications=True)
    with caplog.at_level(logging.WARNING, logger="a2a.agent_push_tokens"):
        for _ in range(3):
            agent_push_tokens.webhook_reachable(target)
    warnings = [r.getMessage() for r in caplog.records]
    assert len(warnings) == 1
    assert "agent far offers push notifications" in warnings[0]
    assert "Set PUBLIC_URL" in warnings[0]


# --- with a real a2a-sdk agent that pushes, at a name that is not this machine's ------------


@pytest.fixture
def peer() -> Iterator[PushAgent]:
    with run_push_agent(card_host="agent.test") as agent:
        yield agent


@pytest.mark.parametrize(
    ("public", "followed_by"),
    [("http://127.0.0.1:8000", "list"), ("https://platform.example.com", "push")],
)
def test_a_far_agent_is_asked_to_push_only_to_a_webhook_it_can_reach(
    db: None,
    make_skill: Any,
    make_agent: Any,
    make_user: Any,
    settings: Any,
    fresh_warnings: None,
    peer: PushAgent,
    public: str,
    followed_by: str,
) -> None:
    settings.ALLOW_LOOPBACK_URLS = True
    settings.PUBLIC_URL = public
    skill = make_skill(id="ce-review")
    make_agent(skills=[skill], a2a_endpoint=f"http://agent.test:{peer.port}")
    data = {"product": "lamp", "behaviour": "slow", "seconds": 0.2}
    # agent.test is this machine under a name that does not say so (as a remote agent's
    # name would not): the platform calls it, the agent cannot know where 127.0.0.1 is.
    with use_resolver(lambda host, port: ["127.0.0.1"]):
        task = creation.create_task(skill_id="ce-review", input=data, user=make_user())
        worker.process_task(task.pk)
    task = Task.objects.get(pk=task.pk)
    assert task.agent.push_notifications  # its card offers push (read at the first call)
    assert task.state in (TaskState.SUBMITTED, TaskState.WORKING)
    assert task.metadata["followedBy"] == followed_by
