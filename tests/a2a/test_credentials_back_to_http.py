"""Offline tasks of an agent reached only over HTTP whose send failed for its credential:
back to HTTP when that can have changed.

* A send refused for the platform's credential (401/403, ``agent_auth_failed``) went
  offline and stayed there after the operator set the agent's new credential: the
  documented rotation ("at the agent, then here, without losing work in flight",
  docs/registry.md) lost the task at its deadline. A new credential now sends it again.
* A new credential saved while a send with the old one was on the wire: the refusal came
  back after the save's check (the task still on A2A), and the task went offline for
  good. It is sent again with the new one.
* The agent's OAuth2 token endpoint down (unreachable, 5xx, 429) was ``agent_auth_failed``
  too: its tasks stayed offline and the agent unhealthy after the endpoint recovered. It
  is ``token_endpoint_unavailable`` now, transient: a passing check clears it and sends
  the tasks again, as after any outage.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from django.test import Client
from django.utils import timezone
from starlette.responses import JSONResponse
from starlette.types import Receive, Scope, Send

from a2a import creation, follow_policy, http_again, transports
from a2a.models import Task
from a2a.states import NextAction, TaskState, Transport
from a2a.transports import credentials as outbound_credentials
from agent_profiles import health
from agent_profiles.credentials import set_credentials
from agent_profiles.models import AgentProfile, HealthStatus
from gateway.models import OPEN_STATUSES, Delivery
from tests.a2a.test_peers import drive, settled
from tests.support.guarded_oauth_agent import guarded_agent
from tests.support.login_guarded_agent import BEARER, login_guarded_agent

pytestmark = pytest.mark.django_db

AUTH_FAILED = "agent_auth_failed"


@pytest.fixture(autouse=True)
def fast(settings: Any) -> None:
    settings.ALLOW_LOOPBACK_URLS = True
    settings.A2A_POLL_INTERVAL = 0.05
    settings.A2A_HTTP_TIMEOUT = 5.0
    settings.A2A_MAX_ATTEMPTS = 2
    settings.A2A_RETRY_BACKOFF = 0.0
    outbound_credentials.forget_tokens()


@pytest.fixture
def skill(make_skill: Any) -> Any:
    return make_skill(id="ce-review")


def offline_or_settled(task: Task) -> bool:
    return task.transport == Transport.OFFLINE or settled(task)


def open_deliveries(task: Task) -> int:
    return Delivery.objects.filter(task=task, status__in=OPEN_STATUSES).count()


def refused_offline(
    make_agent: Callable[..., AgentProfile], skill: Any, user: Any, url: str, **agent: Any
) -> tuple[Task, AgentProfile]:
    """An agent at ``url`` with a credential it no longer takes (rotated at the agent), and
    its task, whose send it refused: offline, ``agent_auth_failed``. Returns both (the
    agent with its API key on ``raw_key``)."""
    profile = make_agent(skills=[skill], a2a_endpoint=url, **agent)
    set_credentials(profile, {"type": "bearer", "token": "the-old-token-rotated-at-the-agent"})
    profile.save()
    data = {"product": "lamp", "behaviour": "complete"}
    task = creation.create_task(skill_id="ce-review", input=data, user=user)
    task = drive(task, offline_or_settled)
    assert (task.state, task.transport) == (TaskState.SUBMITTED, Transport.OFFLINE)
    assert task.error["code"] == AUTH_FAILED
    assert "refused the platform with its bearer credential" in task.error["message"]
    assert open_deliveries(task) == 1
    return task, profile


def register(agent: AgentProfile, auth: dict[str, Any]) -> None:
    """The agent re-registers with a new ``auth`` (docs/registry.md, rotation by the agent)."""
    body = {
        "agentId": agent.pk,
        "skillIds": ["ce-review"],
        "a2aEndpoint": agent.a2a_endpoint,
        "auth": auth,
    }
    response = Client().post(
        "/api/agent-profiles/register",
        json.dumps(body),
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {agent.raw_key}",
    )
    assert response.status_code == 200, response.content


def assert_back_to_http(task: Task, reason: str) -> None:
    task.refresh_from_db()
    assert (task.state, task.transport) == (TaskState.SUBMITTED, Transport.A2A)
    assert task.next_action == NextAction.SEND
    assert task.next_poll_at <= timezone.now()
    assert task.metadata["sendFailures"] == 0  # its HTTP retries are there again
    assert task.metadata["fallbacks"][-1]["to"] == "a2a"
    assert reason in task.metadata["fallbacks"][-1]["reason"]
    assert open_deliveries(task) == 0  # a later gateway connection does not get it too


def test_a_send_refused_for_the_credential_is_sent_with_the_new_one(
    make_agent: Any, skill: Any, user: Any, django_capture_on_commit_callbacks: Any
) -> None:
    """Rotated at the agent, then (the task sent between the two) at the platform by a
    re-registration: the task goes back to HTTP at once and completes with the new one."""
    with login_guarded_agent() as (peer, guard):
        task, agent = refused_offline(make_agent, skill, user, peer.url)
        with django_capture_on_commit_callbacks(execute=True) as callbacks:
            register(agent, {"type": "bearer", "token": BEARER})
        assert any(cb.__qualname__.startswith("queue_processing.") for cb in callbacks)
        assert_back_to_http(task, "a new credential for the agent")
        withdrawn = Delivery.objects.get(task=task)
        assert "a new credential for the agent" in withdrawn.closed_reason
        task = drive(task, settled)
        assert (task.state, task.output) == (TaskState.COMPLETED, {"verdict": "pass"})
        assert peer.sends == 1
        assert guard.counts["/message:send"] == 2  # the refused send, then this one


def test_a_new_credential_refused_too_leaves_the_task_offline_until_the_next_one(
    make_agent: Any, skill: Any, user: Any, django_capture_on_commit_callbacks: Any
) -> None:
    """Sent once per change: a wrong new credential is refused again, and the task waits
    offline again (for the next credential, or its deadline); a check does not send it."""
    with login_guarded_agent() as (peer, guard):
        task, _agent = refused_offline(make_agent, skill, user, peer.url)
        with django_capture_on_commit_callbacks(execute=True):
            profile = AgentProfile.objects.get(pk=task.agent_id)
            set_credentials(profile, {"type": "bearer", "token": "still-not-the-right-one"})
            profile.save()
        task = drive(task, offline_or_settled)
        assert (task.transport, task.error["code"]) == (Transport.OFFLINE, AUTH_FAILED)
        assert guard.counts["/message:send"] == 2
        with django_capture_on_commit_callbacks(execute=True):
            health.check_agents()
        task.refresh_from_db()
        assert task.transport == Transport.OFFLINE
        assert guard.counts["/message:send"] == 2
        assert peer.sends == 0


def test_a_save_without_a_new_credential_leaves_the_refused_task_offline(
    make_agent: Any, skill: Any, user: Any, django_capture_on_commit_callbacks: Any
) -> None:
    with login_guarded_agent() as (peer, _guard):
        task, _agent = refused_offline(make_agent, skill, user, peer.url)
        with django_capture_on_commit_callbacks(execute=True):
            profile = AgentProfile.objects.get(pk=task.agent_id)
            profile.name = "renamed"
            profile.save()
        task.refresh_from_db()
        assert task.transport == Transport.OFFLINE
        assert open_deliveries(task) == 1


def test_an_agent_that_uses_the_gateway_keeps_its_refused_task_waiting_for_it(
    make_agent: Any, skill: Any, user: Any, django_capture_on_commit_callbacks: Any
) -> None:
    """As after an outage: the gateway delivers it when the agent connects."""
    with login_guarded_agent() as (peer, _guard):
        task, agent = refused_offline(
            make_agent, skill, user, peer.url, gateway_seen_at=timezone.now()
        )
        with django_capture_on_commit_callbacks(execute=True):
            register(agent, {"type": "bearer", "token": BEARER})
        task.refresh_from_db()
        assert (task.transport, task.next_action) == (Transport.OFFLINE, NextAction.NONE)
        assert open_deliveries(task) == 1
        assert peer.sends == 0


# --- the token endpoint down ----------------------------------------------------------


async def _unavailable(scope: Scope, receive: Receive, send: Send) -> None:
    body = {"error": "temporarily_unavailable"}
    await JSONResponse(body, status_code=503)(scope, receive, send)


def test_a_token_endpoint_outage_is_transient_and_its_tasks_go_back_when_it_ends(
    make_agent: Any, skill: Any, user: Any, django_capture_on_commit_callbacks: Any
) -> None:
    with guarded_agent() as (peer, guard):
        guard.mode = "oauth2"
        guard._token = _unavailable  # type: ignore[method-assign]  # the IdP is down
        agent = make_agent(skills=[skill], a2a_endpoint=peer.url)
        auth = {
            "type": "oauth2",
            "tokenUrl": f"{peer.url}/oauth/token",
            "clientId": "client-1",
            "clientSecret": "client-secret-1",
            "scopes": [],
        }
        set_credentials(agent, auth)
        agent.save()
        data = {"product": "lamp", "behaviour": "complete"}
        task = creation.create_task(skill_id="ce-review", input=data, user=user)
        task = drive(task, offline_or_settled)
        assert (task.state, task.transport) == (TaskState.SUBMITTED, Transport.OFFLINE)
        assert task.error["code"] == "token_endpoint_unavailable"
        assert task.metadata["sendFailures"] == 2  # retried as a transient error is
        assert guard.counts["/oauth/token"] == 2
        agent.refresh_from_db()
        assert health.health_of(agent).status == HealthStatus.UNHEALTHY
        assert peer.sends == 0

        del guard._token  # the IdP is back
        with django_capture_on_commit_callbacks(execute=True):
            assert health.check_agents() == {agent.pk: HealthStatus.HEALTHY}
        agent.refresh_from_db()
        assert health.health_of(agent) == health.Health(HealthStatus.HEALTHY, "")
        assert_back_to_http(task, "answers over HTTP again")
        task = drive(task, settled)
        assert (task.state, task.output) == (TaskState.COMPLETED, {"verdict": "pass"})
        assert peer.sends == 1


def test_codes_sent_back() -> None:
    """What each way back takes: a refusal only on a new credential."""
    assert "token_endpoint_unavailable" in http_again.UNANSWERED
    assert "credentials_unreadable" in http_again.UNANSWERED
    assert AUTH_FAILED not in http_again.UNANSWERED
    assert {
        AUTH_FAILED,
        "token_endpoint_unavailable",
        "credentials_unreadable",
    } == http_again.REFUSED_CREDENTIAL


# --- a new credential while the old one's send is on the wire ---------------------------

OLD = {"type": "bearer", "token": "the-old-token-rotated-at-the-agent"}


def _new_credential(agent_id: str, *, signals: bool = True) -> None:
    """The operator saves the agent's new credential, its check run at the save's commit
    (``signals``), or written as by a save whose check ran before the hand-over committed
    (the worker's transaction still open): it found nothing offline yet."""
    profile = AgentProfile.objects.get(pk=agent_id)
    set_credentials(profile, {"type": "bearer", "token": BEARER})
    if signals:
        profile.save()
        follow_policy.credentials_changed(agent_id)  # what its on_commit hook runs
    else:
        AgentProfile.objects.filter(pk=agent_id).update(auth_encrypted=profile.auth_encrypted)


def test_a_new_credential_saved_while_the_old_ones_send_is_on_the_wire_is_used(
    make_agent: Any, skill: Any, user: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The old credential is on the request when the new one is saved; its check finds
    the task still on A2A and does nothing. The 401 handed the task to the gateway,
    offline, where it waited for a connection the agent never makes, to fail at its
    deadline. The send is due again at once instead, with the new credential."""
    with login_guarded_agent() as (peer, guard):
        agent = make_agent(skills=[skill], a2a_endpoint=peer.url)
        set_credentials(agent, OLD)
        agent.save()
        real_apply = outbound_credentials.apply

        def apply(target: Any, headers: dict[str, str], **kw: Any) -> str:
            name = real_apply(target, headers, **kw)  # the old one is on the request
            if guard.counts["/message:send"] == 0:
                _new_credential(agent.pk)
            return name

        monkeypatch.setattr(outbound_credentials, "apply", apply)
        data = {"product": "lamp", "behaviour": "complete"}
        task = creation.create_task(skill_id="ce-review", input=data, user=user)
        task = drive(task, lambda t: guard.counts["/message:send"] > 0)
        assert (task.transport, task.next_action) == (Transport.A2A, NextAction.SEND)
        assert task.next_poll_at <= timezone.now()
        assert task.error["code"] == AUTH_FAILED  # why it is sent again
        assert open_deliveries(task) == 0  # never handed over
        task = drive(task, settled)
        assert (task.state, task.output) == (TaskState.COMPLETED, {"verdict": "pass"})
        assert guard.counts["/message:send"] == 2
        assert peer.sends == 1


def test_a_credential_replaced_while_the_hand_over_was_written_sends_it_back(
    make_agent: Any,
    skill: Any,
    user: Any,
    monkeypatch: pytest.MonkeyPatch,
    django_capture_on_commit_callbacks: Any,
) -> None:
    """The save committed between the worker's comparison and its hand-over's commit: its
    check read the task still on A2A, and the worker's read the old credential. Once the
    hand-over committed, the worker looks again and sends the task back to HTTP."""
    with login_guarded_agent() as (peer, _guard):
        agent = make_agent(skills=[skill], a2a_endpoint=peer.url)
        set_credentials(agent, OLD)
        agent.save()
        gateway = transports.gateway()
        real_hand_over = gateway.hand_over

        def hand_over(task: Task, error: Any) -> Task:
            _new_credential(agent.pk, signals=False)
            return real_hand_over(task, error)

        monkeypatch.setattr(gateway, "hand_over", hand_over)
        data = {"product": "lamp", "behaviour": "complete"}
        task = creation.create_task(skill_id="ce-review", input=data, user=user)
        with django_capture_on_commit_callbacks(execute=True):
            task = drive(task, offline_or_settled)
        monkeypatch.undo()
        assert_back_to_http(task, "a new credential for the agent")
        task = drive(task, settled)
        assert (task.state, task.output) == (TaskState.COMPLETED, {"verdict": "pass"})
        assert peer.sends == 1


def test_a_send_refused_with_the_credential_stored_now_is_handed_over(
    make_agent: Any, skill: Any, user: Any, django_capture_on_commit_callbacks: Any
) -> None:
    """No change meanwhile: offline, waiting for the next credential, as before (and not
    sent again and again)."""
    with login_guarded_agent() as (peer, guard):
        agent = make_agent(skills=[skill], a2a_endpoint=peer.url)
        set_credentials(agent, OLD)
        agent.save()
        data = {"product": "lamp", "behaviour": "complete"}
        task = creation.create_task(skill_id="ce-review", input=data, user=user)
        with django_capture_on_commit_callbacks(execute=True):  # the worker's own checks
            task = drive(task, offline_or_settled)
        task.refresh_from_db()
        assert (task.transport, task.error["code"]) == (Transport.OFFLINE, AUTH_FAILED)
        assert open_deliveries(task) == 1
        assert guard.counts["/message:send"] == 1
