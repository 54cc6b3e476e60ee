"""An agent reached only over HTTP that restarts: its task, gone offline once the HTTP
retries were used up, is sent over HTTP again when the agent answers again (a passing
health check, or a call of the agent that succeeds), within its deadline, instead of
waiting for a gateway connection the agent never makes and failing at the deadline. An
agent that uses the gateway keeps its offline task waiting for it, as before."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from django.utils import timezone

from a2a import agent_registry, creation, services
from a2a.models import Task
from a2a.states import NextAction, TaskState, Transport
from agent_profiles import health
from agent_profiles.models import AgentProfile
from gateway.models import OPEN_STATUSES, Delivery, DeliveryStatus
from tests.a2a.test_peers import drive, settled
from tests.support.agents import TestAgent, build_app, run_agent
from tests.support.serving import free_port, serve_agent

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def fast(settings: Any) -> None:
    settings.ALLOW_LOOPBACK_URLS = True
    settings.A2A_POLL_INTERVAL = 0.05
    settings.A2A_HTTP_TIMEOUT = 5.0
    settings.A2A_MAX_ATTEMPTS = 2
    settings.A2A_RETRY_BACKOFF = 0.05


@pytest.fixture
def skill(make_skill: Any) -> Any:
    return make_skill(id="ce-review")


def offline_or_settled(task: Task) -> bool:
    return task.transport == Transport.OFFLINE or settled(task)


def gone_offline(
    make_agent: Callable[..., AgentProfile], skill: Any, user: Any, **agent: Any
) -> tuple[Task, int]:
    """An agent whose endpoint is down (nobody listens on its port) and its task, driven
    through the HTTP retries to the gateway: offline. Returns the task and the port."""
    port = free_port()
    make_agent(skills=[skill], a2a_endpoint=f"http://127.0.0.1:{port}", **agent)
    data = {"product": "lamp", "behaviour": "complete"}
    task = creation.create_task(skill_id="ce-review", input=data, user=user)
    task = drive(task, offline_or_settled)
    assert (task.state, task.transport) == (TaskState.SUBMITTED, Transport.OFFLINE)
    assert task.error["code"] == "agent_unreachable"
    assert task.metadata["sendFailures"] == 2
    assert open_deliveries(task) == 1
    return task, port


def open_deliveries(task: Task) -> int:
    return Delivery.objects.filter(task=task, status__in=OPEN_STATUSES).count()


def hinted(callbacks: list[Callable[[], Any]]) -> bool:
    """Whether a worker is asked to act on a task now (:func:`a2a.hints.queue_processing`)."""
    return any(cb.__qualname__.startswith("queue_processing.") for cb in callbacks)


def test_an_http_only_agent_back_from_a_restart_gets_its_offline_task_over_http(
    make_agent: Any, skill: Any, user: Any, django_capture_on_commit_callbacks: Any
) -> None:
    task, port = gone_offline(make_agent, skill, user)
    with run_agent(port=port) as peer:  # the agent is back, at the same address
        with django_capture_on_commit_callbacks() as callbacks:
            statuses = health.check_agents()  # as the beat runs it
        assert statuses == {"agent-one": "healthy"}
        task.refresh_from_db()
        assert (task.state, task.transport) == (TaskState.SUBMITTED, Transport.A2A)
        assert task.next_action == NextAction.SEND
        assert task.next_poll_at <= timezone.now()
        assert task.metadata["sendFailures"] == 0  # the HTTP retries are there again
        assert task.metadata["fallbacks"][-1]["to"] == "a2a"
        assert open_deliveries(task) == 0  # a later gateway connection does not get it too
        assert hinted(callbacks)
        task = drive(task, settled)
        assert (task.state, task.output) == (TaskState.COMPLETED, {"verdict": "pass"})
        assert peer.sends == 1
    assert open_deliveries(task) == 0
    # A later check finds nothing more to do.
    health.check_agents()
    task.refresh_from_db()
    assert task.state == TaskState.COMPLETED


def test_a_call_of_the_agent_that_succeeds_sends_its_offline_task_again(
    make_agent: Any, skill: Any, user: Any, django_capture_on_commit_callbacks: Any
) -> None:
    task, port = gone_offline(make_agent, skill, user)
    with run_agent(port=port) as peer:
        # Another task's call answered (a poll, a send): the agent is back before any check.
        with django_capture_on_commit_callbacks(execute=True):
            agent_registry.record_call_outcome(AgentProfile.objects.get(pk="agent-one"))
        task.refresh_from_db()
        assert (task.transport, task.next_action) == (Transport.A2A, NextAction.SEND)
        task = drive(task, settled)
        assert task.state == TaskState.COMPLETED
        assert peer.sends == 1
    assert open_deliveries(task) == 0


def test_an_agent_that_uses_the_gateway_keeps_its_offline_task_waiting_for_it(
    make_agent: Any, skill: Any, user: Any
) -> None:
    task, port = gone_offline(make_agent, skill, user, gateway_seen_at=timezone.now())
    with run_agent(port=port) as peer:
        assert health.check_agents() == {"agent-one": "healthy"}
        agent_registry.record_call_outcome(AgentProfile.objects.get(pk="agent-one"))
        task.refresh_from_db()
        assert (task.state, task.transport) == (TaskState.SUBMITTED, Transport.OFFLINE)
        assert task.next_action == NextAction.NONE
        assert open_deliveries(task) == 1
        assert peer.sends == 0


def test_a_task_the_agent_refused_is_not_sent_again(make_agent: Any, skill: Any, user: Any) -> None:
    """Only a task whose endpoint did not answer goes back: one the agent refused (here
    HTTP 404) would be refused again, and go offline again, at every check until its
    deadline."""
    task, port = gone_offline(make_agent, skill, user)
    error = {"code": "agent_refused", "message": "HTTP 404", "details": {"httpStatus": 404}}
    task.note(error=error)
    with run_agent(port=port) as peer:
        assert health.check_agents() == {"agent-one": "healthy"}
        task.refresh_from_db()
        assert task.transport == Transport.OFFLINE
        assert open_deliveries(task) == 1
        assert peer.sends == 0


def test_a_reply_gone_offline_goes_back_over_http_when_the_agent_answers_again(
    make_agent: Any, skill: Any, user: Any
) -> None:
    """A person's answer to the agent's question, sent while the agent restarts: its
    retries used up, the reply waited on the gateway, which the agent never connects to.
    When the agent answers again, the reply goes to it over HTTP, and the task ends."""
    agent = TestAgent(port=free_port())
    app = build_app(agent)  # its task store outlives a restart: the agent keeps its task
    make_agent(skills=[skill], a2a_endpoint=agent.url)
    data = {"product": "lamp", "behaviour": "ask"}
    with serve_agent(agent, app):
        task = creation.create_task(skill_id="ce-review", input=data, user=user)
        task = drive(task, lambda t: t.state == TaskState.INPUT_REQUIRED or settled(t))
        assert task.state == TaskState.INPUT_REQUIRED
    services.reply_to_task(task, text="EU")  # the agent is down now
    task = drive(task, offline_or_settled)
    assert (task.state, task.transport) == (TaskState.WORKING, Transport.OFFLINE)
    assert task.error["code"] == "agent_unreachable"
    assert open_deliveries(task) == 1  # the reply, waiting on the gateway
    with serve_agent(agent, app):
        assert health.check_agents() == {"agent-one": "healthy"}
        task.refresh_from_db()
        assert (task.transport, task.next_action) == (Transport.A2A, NextAction.SEND)
        assert open_deliveries(task) == 0
        withdrawn = Delivery.objects.get(task=task)
        assert "answers over HTTP again" in withdrawn.closed_reason
        task = drive(task, settled)
    assert (task.state, task.output["answer"]) == (TaskState.COMPLETED, "EU")
    assert len(agent.replies[task.remote_task_id]) == 1


def test_a_task_whose_assignment_is_out_on_a_socket_stays_with_the_gateway(
    make_agent: Any, skill: Any, user: Any
) -> None:
    """The agent took the assignment over a socket meanwhile (sent, not acked yet): it may
    act on it, so the task is not sent over HTTP as well."""
    task, port = gone_offline(make_agent, skill, user)
    Delivery.objects.filter(task=task).update(status=DeliveryStatus.SENT)
    with run_agent(port=port) as peer:
        assert health.check_agents() == {"agent-one": "healthy"}
        task.refresh_from_db()
        assert (task.transport, task.next_action) == (Transport.OFFLINE, NextAction.NONE)
        assert Delivery.objects.get(task=task).status == DeliveryStatus.SENT
        assert peer.sends == 0


def test_a_task_whose_sends_timed_out_is_not_sent_again(
    make_agent: Any, skill: Any, user: Any
) -> None:
    """A send that timed out reached the agent, which may be working on it, only slower
    than ``A2A_HTTP_TIMEOUT``: sent again at every passing check, with its HTTP retries
    there again each time, the agent was made to start the work over until the deadline
    (21 sends in five minutes, live)."""
    task, port = gone_offline(make_agent, skill, user)
    error = {"code": "agent_timeout", "message": "no answer within 10 s", "details": {}}
    task.note(error=error)
    with run_agent(port=port) as peer:
        assert health.check_agents() == {"agent-one": "healthy"}
        agent_registry.record_call_outcome(AgentProfile.objects.get(pk="agent-one"))
        task.refresh_from_db()
        assert task.transport == Transport.OFFLINE
        assert open_deliveries(task) == 1
        assert peer.sends == 0
