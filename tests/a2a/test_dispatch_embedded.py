"""End to end in the embedded mode: a real a2a-sdk agent, a real Celery worker and beat
(threads, memory broker) in this process, and the SQLite test database."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from django.test import override_settings
from rest_framework.test import APIClient

from a2a import creation, services
from a2a.models import Task, TaskEvent
from a2a.states import NextAction, TaskState
from tests.a2a.helpers import embedded_workers, lose_new_tasks_hints, wait_for
from tests.support.agents import TestAgent, run_agent
from tests.support.serving import down_url

pytestmark = [pytest.mark.slow]

FAST = {
    "A2A_POLL_INTERVAL": 0.1,
    "A2A_POLL_BACKOFF": 1.5,
    "A2A_POLL_INTERVAL_MAX": 0.4,
    "A2A_RETRY_BACKOFF": 0.1,
    "A2A_HTTP_TIMEOUT": 1.0,
    "A2A_CONNECT_TIMEOUT": 0.5,
    "A2A_SWEEP_INTERVAL": 0.3,
    "A2A_LEASE_SECONDS": 5.0,
    "A2A_MAX_ATTEMPTS": 3,
}


@pytest.fixture(scope="module")
def stack(django_db_blocker: Any) -> Iterator[TestAgent]:
    """One agent and one embedded worker + beat for the whole module (fast settings)."""
    with (
        override_settings(**FAST),
        django_db_blocker.unblock(),
        run_agent() as peer,
        embedded_workers(sweep_interval=FAST["A2A_SWEEP_INTERVAL"]),
    ):
        yield peer


@pytest.fixture
def peer(stack: TestAgent, transactional_db: None) -> TestAgent:
    stack.reset()
    return stack


@pytest.fixture
def user(make_user: Any) -> Any:
    return make_user()


@pytest.fixture
def skill(make_skill: Any) -> Any:
    return make_skill()


@pytest.fixture
def agent(make_agent: Any, skill: Any, peer: TestAgent) -> Any:
    return make_agent(skills=[skill], a2a_endpoint=peer.url)


def start(user: Any, behaviour: str, **extra: Any) -> Task:
    data = {"product": "lamp", "behaviour": behaviour, **extra}
    return creation.create_task(skill_id="ce-review", input=data, user=user)


def completed_events(task: Task) -> int:
    return TaskEvent.objects.filter(task=task, to_state=TaskState.COMPLETED).count()


def test_an_instant_agent_completes_the_task_in_one_request(
    peer: TestAgent, agent: Any, user: Any
) -> None:
    task = wait_for(start(user, "complete"))
    assert task.state == TaskState.COMPLETED
    assert task.output == {"verdict": "pass"}
    assert task.attempts == 1
    assert task.remote_task_id
    # One request for the task, no poll of it. The card is read before the first call, and
    # a sweep may list the agent (GET /tasks) between its send and the answer: neither is
    # the task's.
    own = peer.total - peer.counts["/.well-known/agent-card.json"] - peer.counts["/tasks"]
    assert own == peer.counts["/message:send"] == 1
    assert completed_events(task) == 1
    assert task.next_action == NextAction.NONE
    assert task.lease_until is None


def test_the_agent_receives_the_documented_message(peer: TestAgent, agent: Any, user: Any) -> None:
    task = wait_for(start(user, "complete"))
    sent = peer.messages[-1]
    assert sent["messageId"] == task.outbound_message["messageId"]
    assert sent["role"] == "ROLE_USER"
    assert sent["metadata"] == {"skillId": "ce-review"}
    assert sent["parts"][0]["data"]["product"] == "lamp"


def test_a_bare_message_reply_completes_the_task(peer: TestAgent, agent: Any, user: Any) -> None:
    task = wait_for(start(user, "message", output={"verdict": "fail"}))
    assert (task.state, task.output) == (TaskState.COMPLETED, {"verdict": "fail"})
    assert task.messages.filter(direction="from_agent").count() == 1


def test_schema_invalid_output_fails_with_the_errors(
    peer: TestAgent, agent: Any, user: Any
) -> None:
    task = wait_for(start(user, "invalid"))
    assert task.state == TaskState.FAILED
    assert task.error["code"] == "output_invalid"
    assert task.error["details"]["errors"][0]["path"] == "verdict"
    assert task.artifacts  # kept for the admin


def test_a_question_waits_for_a_reply_then_completes(
    peer: TestAgent, agent: Any, user: Any
) -> None:
    task = wait_for(start(user, "ask"), lambda t: t.state == TaskState.INPUT_REQUIRED)
    assert "EU or UK" in task.question["parts"][0]["text"]
    assert task.next_action == NextAction.NONE
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Bearer {user.raw_token}")
    question = api.get(f"/api/tasks/{task.pk}").json()["question"]
    assert question["parts"][0]["text"] == "Which market: EU or UK?"
    reply = api.post(f"/api/tasks/{task.pk}/reply", {"data": {"market": "EU"}}, format="json")
    assert reply.status_code == 200, reply.content
    task = wait_for(task)
    assert task.state == TaskState.COMPLETED
    assert task.output == {"verdict": "pass", "answer": {"market": "EU"}}
    answer = peer.replies[task.remote_task_id][0]
    assert (answer.task_id, answer.context_id) == (task.remote_task_id, task.remote_context_id)


@pytest.mark.parametrize(
    ("behaviour", "state", "code"),
    [
        ("fail", TaskState.FAILED, "agent_failed"),
        ("reject", TaskState.REJECTED, "rejected"),
        ("crash", TaskState.FAILED, "agent_failed"),
    ],
)
def test_an_agent_failure_ends_the_task(
    peer: TestAgent, agent: Any, user: Any, behaviour: str, state: str, code: str
) -> None:
    task = wait_for(start(user, behaviour))
    assert (task.state, task.error["code"]) == (state, code)


def test_a_slow_agent_is_polled_with_backoff_until_it_completes(
    peer: TestAgent, agent: Any, user: Any, settings: Any
) -> None:
    settings.A2A_LIST_INTERVAL = 0  # no listing: each task polled on its own
    task = wait_for(start(user, "slow", seconds=1.2))
    assert task.state == TaskState.COMPLETED
    assert task.metadata["followedBy"] == "poll"
    polls = peer.requests_for(task.remote_task_id)
    assert 2 <= polls <= 10
    assert task.poll_interval > FAST["A2A_POLL_INTERVAL"]
    assert completed_events(task) == 1


def test_a_slow_agent_is_followed_by_listing_it(peer: TestAgent, agent: Any, user: Any) -> None:
    tasks = [start(user, "slow", seconds=1.2) for _ in range(3)]
    for task in tasks:
        task = wait_for(task)
        assert (task.state, task.metadata["followedBy"]) == (TaskState.COMPLETED, "list")
        assert peer.requests_for(task.remote_task_id) == 0  # the listings told
        assert completed_events(task) == 1
    assert peer.counts["/tasks"] >= 1


def test_a_down_agent_falls_back_to_the_gateway_after_the_retries(
    make_agent: Any, skill: Any, user: Any, peer: TestAgent
) -> None:
    make_agent(skills=[skill], a2a_endpoint=down_url())
    task = wait_for(start(user, "complete"), lambda t: t.transport == "offline")
    assert task.state == TaskState.SUBMITTED
    assert task.attempts == FAST["A2A_MAX_ATTEMPTS"]
    (fallback,) = task.metadata["fallbacks"]
    assert "agent_unreachable" in fallback["reason"]


def test_a_500_agent_is_retried_then_falls_back_to_the_gateway(
    make_agent: Any, skill: Any, user: Any, peer: TestAgent
) -> None:
    make_agent(skills=[skill], a2a_endpoint=peer.url_for("500"))
    task = wait_for(start(user, "complete"), lambda t: t.transport == "offline")
    assert "HTTP 500" in task.metadata["fallbacks"][0]["reason"]
    assert peer.sends == 3


@pytest.mark.parametrize("mode", ["html", "garbage", "wrongshape"])
def test_an_answer_that_is_not_a2a_fails_the_attempt_clearly(
    make_agent: Any, skill: Any, user: Any, peer: TestAgent, mode: str
) -> None:
    make_agent(skills=[skill], a2a_endpoint=peer.url_for(mode))
    task = wait_for(start(user, "complete"))
    assert (task.state, task.error["code"]) == (TaskState.FAILED, "not_a2a")
    assert "message:send" in task.error["message"]
    assert peer.sends == 1


def test_a_hanging_agent_times_out(
    make_agent: Any, skill: Any, user: Any, peer: TestAgent, settings: Any
) -> None:
    settings.A2A_TASK_TIMEOUT = 1.5
    make_agent(skills=[skill], a2a_endpoint=peer.url_for("hang"))
    task = wait_for(start(user, "complete"))
    assert task.state == TaskState.FAILED
    assert task.error["code"] in {"timeout", "agent_timeout"}
    assert "time" in task.error["message"].lower()


def test_a_task_past_its_deadline_fails_and_the_agent_is_told(
    peer: TestAgent, agent: Any, user: Any, settings: Any
) -> None:
    settings.A2A_TASK_TIMEOUT = 1.0
    task = wait_for(start(user, "working"))
    assert (task.state, task.error["code"]) == (TaskState.FAILED, "timeout")
    assert "A2A_TASK_TIMEOUT" in task.error["message"]
    wait_for(task, lambda t: "remoteCancel" in t.metadata)
    assert task.remote_task_id in peer.canceled


def test_a_legacy_agent_is_understood(
    make_agent: Any, skill: Any, user: Any, peer: TestAgent
) -> None:
    make_agent(skills=[skill], a2a_endpoint=peer.url_for("legacy"))
    task = wait_for(start(user, "complete"))
    assert (task.state, task.output) == (TaskState.COMPLETED, {"verdict": "pass"})


@pytest.mark.parametrize("mode", ["busy", "flaky"])
def test_a_busy_or_flaky_agent_is_retried_with_the_same_message_id(
    make_agent: Any, skill: Any, user: Any, peer: TestAgent, mode: str
) -> None:
    make_agent(skills=[skill], a2a_endpoint=peer.url_for(mode))
    task = wait_for(start(user, "complete"))
    assert task.state == TaskState.COMPLETED
    # Counted on this mode's path: a hanging send of an earlier test may still be retried.
    assert (peer.counts[f"/x/{mode}/message:send"], task.attempts) == (2, 2)
    assert peer.messages[-1]["messageId"] == task.outbound_message["messageId"]


def test_cancel_reaches_the_agent(peer: TestAgent, agent: Any, user: Any) -> None:
    task = wait_for(start(user, "working"), lambda t: t.state == TaskState.WORKING)
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Bearer {user.raw_token}")
    assert api.post(f"/api/tasks/{task.pk}/cancel").status_code == 200
    task = wait_for(task, lambda t: "remoteCancel" in t.metadata)
    assert task.state == TaskState.CANCELED
    assert task.metadata["remoteCancel"]["state"] == TaskState.CANCELED
    assert task.remote_task_id in peer.canceled


def test_a_person_can_retry_a_failed_task(peer: TestAgent, agent: Any, user: Any) -> None:
    task = wait_for(start(user, "fail"))
    services.retry_task(task)
    task = wait_for(task)
    assert (task.state, task.attempts) == (TaskState.FAILED, 2)
    ids = [m["messageId"] for m in peer.messages[-2:]]
    assert ids[0] != ids[1]


def test_the_sweep_picks_up_a_task_whose_message_was_lost(
    peer: TestAgent, agent: Any, user: Any, monkeypatch: Any
) -> None:
    lose_new_tasks_hints(monkeypatch)
    task = wait_for(start(user, "complete"))
    assert task.state == TaskState.COMPLETED


def test_a_cancel_during_the_send_still_reaches_the_agent(
    peer: TestAgent, agent: Any, user: Any
) -> None:
    task = start(user, "slowsend", seconds=0.8, then="working")
    wait_for(task, lambda t: len(peer.messages) == 1)
    services.cancel_task(task)
    task = wait_for(task, lambda t: "remoteCancel" in t.metadata)
    assert task.state == TaskState.CANCELED
    assert task.remote_task_id in peer.canceled
