"""A send whose failure comes back after its task changed elsewhere changes nothing of it.

The send goes to the real test agent (:mod:`tests.support.agents`), which fails it (HTTP
500, or 404 for a mode it does not know). While the request is on the wire, the test
does what another part of the platform would do meanwhile (the sweep's timeout, a
person's cancel, another worker's claim): the transport's send is wrapped so that this
runs after the agent answered and before the worker sees the failure. Nothing waits on a
clock: the agent's ``timeoutMs`` is made to have run out by moving the task's creation
back.

Also: a timeout's ``details.timeoutSeconds`` is the timeout its message names (the
agent's ``timeoutMs`` when it has one).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from a2a import creation, deadlines, services, worker
from a2a.models import Task
from a2a.states import TaskState, Transport
from a2a.transports.rest import RestTransport
from gateway.models import Delivery
from tests.support.agents import TestAgent, run_agent

# The row's fields a failure handled too late must leave as they were.
FIELDS = ("state", "error", "metadata", "transport", "next_action", "lease_until", "attempts")


@pytest.fixture(scope="module")
def peer() -> Iterator[TestAgent]:
    with run_agent() as agent:
        yield agent


@pytest.fixture(autouse=True)
def fast(settings: Any) -> None:
    settings.ALLOW_LOOPBACK_URLS = True
    settings.A2A_HTTP_TIMEOUT = 5.0
    settings.A2A_TASK_TIMEOUT = 40.0


@pytest.fixture
def skill(make_skill: Any) -> Any:
    return make_skill(id="ce-review")


def meanwhile(monkeypatch: Any, task: Task, act: Callable[[Task], Any]) -> dict[str, Any]:
    """Run ``act`` on the task (read afresh) while its send is on the wire: after the agent
    answered, before the worker handles the failure. Returns the row's ``FIELDS`` as
    ``act`` left them (filled in when it ran)."""
    left: dict[str, Any] = {}
    original = RestTransport.send

    def send(self: RestTransport, *args: Any, **kwargs: Any) -> Any:
        try:
            return original(self, *args, **kwargs)
        finally:
            act(Task.objects.select_related("agent", "skill").get(pk=task.pk))
            left.update(Task.objects.values(*FIELDS).get(pk=task.pk))

    monkeypatch.setattr(RestTransport, "send", send)
    return left


def run_once(task: Task) -> Task:
    """The worker takes the task up now (its hint's claim, as in ``test_peers.drive``)."""
    Task.objects.filter(pk=task.pk).update(next_poll_at=timezone.now(), lease_until=None)
    worker.process_task(task.pk)
    task.refresh_from_db()
    return task


def start(user: Any) -> Task:
    return creation.create_task(skill_id="ce-review", input={"product": "lamp"}, user=user)


def assert_left_alone(task: Task, left: dict[str, Any], caplog: Any) -> None:
    assert left, "the send never reached the agent"
    assert Task.objects.values(*FIELDS).get(pk=task.pk) == left
    assert "internalErrors" not in task.metadata
    assert "lastAgentAnswer" not in task.metadata
    assert not task.metadata.get("fallbacks")
    assert not Delivery.objects.filter(task=task).exists()
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert errors == [], [r.getMessage() for r in errors]


def test_a_send_failing_after_the_agents_timeout_ended_the_task_changes_nothing(
    peer: TestAgent,
    make_agent: Any,
    skill: Any,
    user: Any,
    monkeypatch: Any,
    caplog: Any,
) -> None:
    """The agent's ``timeoutMs`` (3 s) runs out while the send is on the wire; the sweep
    fails the task (``timeout``); then the agent's 500 comes back, when the retries would
    pass the deadline: the task was handed to the gateway, its error overwritten with the
    agent's answer and the gateway's refusal counted as an internal error."""
    make_agent(
        skills=[skill], a2a_endpoint=peer.url_for("500"), timeout=3.0, card_read_at=timezone.now()
    )
    task = start(user)
    # Created 10 s ago: the send sets the deadline from the agent's timeoutMs, 7 s ago.
    Task.objects.filter(pk=task.pk).update(created_at=timezone.now() - timedelta(seconds=10))
    left = meanwhile(monkeypatch, task, lambda row: deadlines.expire_overdue())
    caplog.set_level(logging.INFO)
    task = run_once(task)
    assert (task.state, task.error["code"]) == (TaskState.FAILED, "timeout")
    assert_left_alone(task, left, caplog)
    assert task.transport == Transport.A2A
    assert [e.to_state for e in task.events.all()][-1] == TaskState.FAILED
    # The timeout's details say the timeout its message names: the agent's own.
    assert "within 3 s (the agent's timeoutMs)" in task.error["message"]
    assert task.error["details"]["timeoutSeconds"] == 3.0
    assert peer.counts["/x/500/message:send"] >= 1


def test_a_send_refused_after_a_person_canceled_the_task_changes_nothing(
    peer: TestAgent,
    make_agent: Any,
    skill: Any,
    user: Any,
    monkeypatch: Any,
    caplog: Any,
) -> None:
    """A 404 goes to the gateway at once (not retried): the task canceled meanwhile stays
    CANCELED, with no error, no fallback, no gateway assignment."""
    make_agent(
        skills=[skill], a2a_endpoint=peer.url_for("nothing-here"), card_read_at=timezone.now()
    )
    task = start(user)
    left = meanwhile(monkeypatch, task, lambda row: services.cancel_task(row, by=user))
    task = run_once(task)
    assert (task.state, task.error) == (TaskState.CANCELED, None)
    assert_left_alone(task, left, caplog)


def test_a_send_failing_after_another_worker_claimed_the_task_changes_nothing(
    peer: TestAgent,
    make_agent: Any,
    skill: Any,
    user: Any,
    monkeypatch: Any,
    caplog: Any,
    settings: Any,
) -> None:
    """This worker's claim ran out during the send and another worker holds the task now:
    the failure is that worker's business no more (it would be handed to the gateway
    under the other worker's send)."""
    settings.A2A_MAX_ATTEMPTS = 1  # the first transient failure goes to the gateway
    make_agent(skills=[skill], a2a_endpoint=peer.url_for("500"), card_read_at=timezone.now())
    task = start(user)

    def claimed_elsewhere(row: Task) -> None:
        later = timezone.now() + timedelta(seconds=60)
        Task.objects.filter(pk=row.pk).update(lease_until=later)

    left = meanwhile(monkeypatch, task, claimed_elsewhere)
    task = run_once(task)
    assert (task.state, task.transport) == (TaskState.SUBMITTED, Transport.A2A)
    assert task.error is None
    assert_left_alone(task, left, caplog)


def test_the_failure_still_goes_to_the_gateway_while_the_task_is_as_read(
    peer: TestAgent, make_agent: Any, skill: Any, user: Any
) -> None:
    """The check costs the ordinary fallback nothing: a 404 goes offline with the
    agent's answer as the task's error."""
    make_agent(
        skills=[skill], a2a_endpoint=peer.url_for("nothing-here"), card_read_at=timezone.now()
    )
    task = run_once(start(user))
    assert (task.state, task.transport) == (TaskState.SUBMITTED, Transport.OFFLINE)
    assert task.error["code"] == task.metadata["lastAgentAnswer"]["code"]
    assert len(task.metadata["fallbacks"]) == 1
    assert Delivery.objects.filter(task=task).count() == 1


# --- the timeout's details ----------------------------------------------------------------


@pytest.mark.parametrize(("timeout", "expected"), [(3.0, 3.0), (None, 40.0)])
def test_a_timeouts_details_name_the_timeout_its_message_names(
    make_agent: Any, skill: Any, user: Any, timeout: float | None, expected: float
) -> None:
    make_agent(skills=[skill], timeout=timeout)
    task = start(user)
    Task.objects.filter(pk=task.pk).update(
        attempts=1, deadline_at=timezone.now() - timedelta(seconds=1)
    )
    assert deadlines.expire_overdue() == 1
    task.refresh_from_db()
    source = "the agent's timeoutMs" if timeout else "A2A_TASK_TIMEOUT"
    assert f"within {expected:g} s ({source})" in task.error["message"]
    assert task.error["details"]["timeoutSeconds"] == expected
