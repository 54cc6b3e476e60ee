"""A send's answer that comes back after a person reassigned or retried the task.

Against real a2a-sdk agents: the person's reassign (or a retry, after the sweep failed
the task) lands while the worker's send to the first agent is on the wire. The answer
belongs to the earlier attempt: it must not be applied to the fresh one (the first
agent's task id on the new attempt made it poll the new agent for a task it never had),
and the first agent's task it started is canceled, since nothing follows it any more.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from django.utils import timezone

from a2a import services
from a2a.exceptions import A2AProtocolError, A2ATransientError
from a2a.models import Task
from a2a.states import NextAction, TaskState
from a2a.transports.rest import RestTransport
from a2a.worker import process_task
from tests.support.agents import TestAgent, run_agent

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def peers() -> Iterator[tuple[TestAgent, TestAgent]]:
    with run_agent() as one, run_agent() as two:
        yield one, two


@pytest.fixture
def user(
    make_skill: Any,
    make_agent: Any,
    make_user: Any,
    peers: tuple[TestAgent, TestAgent],
    settings: Any,
) -> Any:
    settings.ALLOW_LOOPBACK_URLS = True
    settings.A2A_LIST_INTERVAL = 0  # polled one by one: the plainest way to follow a task
    skill = make_skill(id="ce-review")
    now = timezone.now()
    make_agent(skills=[skill], a2a_endpoint=peers[0].url, card_read_at=now)
    make_agent(skills=[skill], id="agent-two", a2a_endpoint=peers[1].url, card_read_at=now)
    return make_user()


def create(user: Any) -> Task:
    return services.create_task(
        skill_id="ce-review",
        input={"product": "lamp", "behaviour": "working"},
        agent_id="agent-one",
        user=user,
    )


def meanwhile(
    monkeypatch: pytest.MonkeyPatch, act: Callable[[], None], raises: Exception | None = None
) -> None:
    """The first send reaches the agent; ``act`` runs before its answer is applied (or
    ``raises`` is what the send answers instead)."""
    real_send = RestTransport.send

    def send(self: RestTransport, *args: Any, **kwargs: Any) -> Any:
        monkeypatch.setattr(RestTransport, "send", real_send)  # the first send only
        reply = real_send(self, *args, **kwargs)
        act()
        if raises is not None:
            raise raises
        return reply

    monkeypatch.setattr(RestTransport, "send", send)


def reassign(task: Task, user: Any) -> Callable[[], None]:
    def act() -> None:
        row = Task.objects.select_related("agent", "skill").get(pk=task.pk)
        services.reassign_task(row, agent_id="agent-two", by=user)

    return act


def assert_fresh_attempt_at(task: Task, agent_id: str) -> None:
    """The fresh attempt stands, its send still due, nothing of the old answer on it."""
    task.refresh_from_db()
    assert task.agent_id == agent_id
    assert (task.state, task.next_action, task.remote_task_id) == (
        TaskState.SUBMITTED,
        NextAction.SEND,
        "",
    )
    assert task.error is None


def test_a_reassign_during_the_send_is_not_taken_over_by_its_answer(
    user: Any, peers: tuple[TestAgent, TestAgent], monkeypatch: pytest.MonkeyPatch
) -> None:
    one, two = peers
    task = create(user)
    meanwhile(monkeypatch, reassign(task, user))
    process_task(task.pk)
    assert_fresh_attempt_at(task, "agent-two")
    assert len(one.canceled) == 1  # the first agent's task, which nothing follows now
    process_task(task.pk)  # the fresh attempt goes to the new agent
    task.refresh_from_db()
    assert two.sends == 1
    assert task.remote_task_id
    assert task.state == TaskState.SUBMITTED
    assert task.next_action == NextAction.POLL


def test_a_retry_during_the_send_gets_its_own_send(
    user: Any, peers: tuple[TestAgent, TestAgent], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The sweep failed the task while its send was on the wire, and a person retried it
    at once: the retry's send (a new message) is not replaced by the first one's task."""
    one, _ = peers
    task = create(user)

    def retry() -> None:
        row = Task.objects.select_related("agent", "skill").get(pk=task.pk)
        row.fail("timeout", "timed out")
        services.retry_task(row, by=user)

    meanwhile(monkeypatch, retry)
    process_task(task.pk)
    assert_fresh_attempt_at(task, "agent-one")
    assert len(one.canceled) == 1
    process_task(task.pk)
    assert one.sends == 2


@pytest.mark.parametrize(
    "failure",
    [
        A2AProtocolError("The agent's answer is not A2A."),
        A2ATransientError("down", code="agent_unreachable"),
    ],
    ids=["not_a2a", "transient"],
)
def test_a_failed_send_overtaken_by_a_reassign_leaves_the_new_attempt_alone(
    user: Any, monkeypatch: pytest.MonkeyPatch, failure: Exception
) -> None:
    """A failure of the old send neither fails the new attempt (blaming the old agent)
    nor puts its send off, nor writes over its metadata (the reassignment's record)."""
    task = create(user)
    meanwhile(monkeypatch, reassign(task, user), raises=failure)
    process_task(task.pk)
    assert_fresh_attempt_at(task, "agent-two")
    assert task.next_poll_at is not None
    assert task.next_poll_at <= timezone.now()
    assert len(task.metadata["reassignments"]) == 1
    assert "sendFailures" not in task.metadata
