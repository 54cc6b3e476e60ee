"""An agent that refuses the platform's credential (HTTP 401/403) while the platform
follows a task it accepted: the task waits in its state with ``agent_auth_failed`` in its
``error``, its reads (polls, batched polls, subscribes) are tried again with backoff until
its deadline, a new credential (the admin, a registration) makes them due at once, and at
the deadline it times out naming the refusal.

Why: the agent's owner rotates its token at the agent, then (a moment later) at the
platform. One 401 on a poll failed the task for good ("Lost track of the task"): the
agent's work was lost and a retry would redo it, although the new credential came
seconds later (docs/dispatch.md: a misconfigured agent ends the task at its timeout)."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import pytest
from django.test import Client
from django.utils import timezone

from a2a import agent_reads, agent_streams, creation, deadlines, engine, follow_policy, worker
from a2a.agent_registry import target_for
from a2a.exceptions import A2AAuthError
from a2a.models import Task
from a2a.states import NextAction, TaskState
from a2a.transports import credentials as outbound_credentials
from a2a.transports.base import AgentReply
from agent_profiles.credentials import set_credentials
from agent_profiles.health import record_call_outcome
from agent_profiles.models import AgentProfile
from tests.a2a.test_peers import drive, settled
from tests.support.login_guarded_agent import BEARER, login_guarded_agent

AUTH_FAILED = "agent_auth_failed"
REFUSED = (
    "Agent 'agent-one' refused the platform with its bearer credential: HTTP 401 to "
    "GET http://127.0.0.1:9/tasks/agent-task-1: unauthorized"
)


@pytest.fixture(autouse=True)
def fast(settings: Any) -> None:
    settings.ALLOW_LOOPBACK_URLS = True
    settings.A2A_POLL_INTERVAL = 0.05
    settings.A2A_HTTP_TIMEOUT = 5.0
    outbound_credentials.forget_tokens()


@pytest.fixture
def skill(make_skill: Any) -> Any:
    return make_skill(id="ce-review")


@pytest.fixture
def hints(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """The tasks a credential change hinted to the workers (nothing is sent)."""
    sent: list[Any] = []
    monkeypatch.setattr(follow_policy, "queue_processing_many", lambda ids: sent.extend(ids))
    return sent


def start(user: Any, seconds: float) -> Task:
    data = {"product": "lamp", "behaviour": "slow", "seconds": seconds}
    return creation.create_task(skill_id="ce-review", input=data, user=user)


def with_bearer(agent: AgentProfile, token: str = BEARER) -> AgentProfile:
    set_credentials(agent, {"type": "bearer", "token": token})
    agent.save()
    return agent


def run_once(task: Task) -> Task:
    """Its due action once, now (the test does not wait out the backoff)."""
    Task.objects.filter(pk=task.pk).update(next_poll_at=timezone.now(), lease_until=None)
    worker.process_task(task.pk)
    task.refresh_from_db()
    return task


def working(task: Task) -> bool:
    return task.state == TaskState.WORKING


def followed(task: Task, action: str = NextAction.POLL, **fields: Any) -> Task:
    """``task`` as if sent and accepted: WORKING at the agent as ``agent-task-1``, its
    ``action`` due now."""
    values = {
        "state": TaskState.WORKING,
        "remote_task_id": "agent-task-1",
        "attempts": 1,
        "next_action": action,
        "next_poll_at": timezone.now(),
        "lease_until": None,
        **fields,
    }
    Task.objects.filter(pk=task.pk).update(**values)
    task.refresh_from_db()
    return task


def refuse_reads(monkeypatch: pytest.MonkeyPatch, status: int = 401) -> None:
    def refused(target: Any, remote_task_id: str) -> AgentReply:
        raise A2AAuthError(REFUSED.replace("401", str(status)), status=status)

    monkeypatch.setattr(agent_reads, "read_task", refused)


# --- a real agent rotating its token --------------------------------------------------------


def test_a_poll_refused_for_the_credential_waits_until_a_new_one_lets_the_task_complete(
    make_agent: Any, skill: Any, user: Any, django_capture_on_commit_callbacks: Any
) -> None:
    """The rotation of the report: 401 on the polls, then the new credential at the
    platform. The task stays WORKING, says why, backs off; the new credential makes its
    poll due at once, and it completes with the agent's one run of the work."""
    with login_guarded_agent() as (peer, guard):
        agent = with_bearer(make_agent(skills=[skill], a2a_endpoint=peer.url))
        task = drive(start(user, seconds=2), working)
        guard.reject = True  # rotated at the agent: the old token is refused
        before = guard.polls()
        task = run_once(task)
        first_interval = task.poll_interval
        task = run_once(task)
        assert guard.polls() == before + 2
        assert task.state == TaskState.WORKING, task.error
        assert task.error["code"] == AUTH_FAILED
        assert "HTTP 401" in task.error["message"]
        assert BEARER not in json.dumps(task.error)
        assert task.next_action == NextAction.POLL
        assert task.next_poll_at > timezone.now()
        assert task.poll_interval > first_interval  # backing off
        agent.refresh_from_db()
        assert (agent.last_call_ok, agent.last_call_code) == (False, AUTH_FAILED)

        guard.reject = False  # ...and the new token is set at the platform
        with django_capture_on_commit_callbacks(execute=True):
            with_bearer(AgentProfile.objects.get(pk=agent.pk))
        task.refresh_from_db()
        assert task.next_poll_at <= timezone.now()  # due at once, not after the backoff
        assert task.poll_interval == 0.0
        task = drive(task, settled)
        assert (task.state, task.error) == (TaskState.COMPLETED, None)
        assert peer.sends == 1  # the work was done once


def test_a_subscribe_refused_for_the_credential_waits_until_a_new_one_is_registered(
    make_agent: Any, skill: Any, user: Any, django_capture_on_commit_callbacks: Any
) -> None:
    """A task followed over a stream: its ``SubscribeToTask`` answered 403 left it FAILED
    ("the stream broke off"). It waits, subscribes again with backoff, and the agent's
    own re-registration with a new credential (the API) makes the subscribe due at once."""
    with login_guarded_agent() as (peer, guard):
        agent = with_bearer(make_agent(skills=[skill], a2a_endpoint=peer.url))
        task = drive(start(user, seconds=3), working)
        # The agent's task is followed by subscribing from now on.
        metadata = {**task.metadata, "noPolling": "followed over a stream in this test"}
        task = followed(
            task, NextAction.FOLLOW, metadata=metadata, remote_task_id=task.remote_task_id
        )
        guard.reject, guard.status = True, 403
        task = run_once(task)
        assert guard.counts[f"/tasks/{task.remote_task_id}:subscribe"] == 1
        assert task.state == TaskState.WORKING, task.error
        assert (task.error["code"], task.error["details"]["httpStatus"]) == (AUTH_FAILED, 403)
        assert task.next_action == NextAction.FOLLOW
        assert task.next_poll_at > timezone.now()

        guard.reject = False
        body = {
            "agentId": agent.pk,
            "skillIds": ["ce-review"],
            "a2aEndpoint": peer.url,
            "auth": {"type": "bearer", "token": BEARER},
        }
        with django_capture_on_commit_callbacks(execute=True):
            response = Client().post(
                "/api/agent-profiles/register",
                json.dumps(body),
                content_type="application/json",
                HTTP_AUTHORIZATION=f"Bearer {agent.raw_key}",
            )
        assert response.status_code == 200, response.content
        task.refresh_from_db()
        assert task.next_poll_at <= timezone.now()
        task = drive(task, settled)
        assert (task.state, task.error) == (TaskState.COMPLETED, None)
        assert peer.sends == 1


# --- the rules, without an agent ------------------------------------------------------------


def test_a_refused_poll_times_out_at_the_deadline_naming_the_refusal(
    task: Task, monkeypatch: pytest.MonkeyPatch, django_capture_on_commit_callbacks: Any
) -> None:
    """Refused on every poll, the task is not kept past its deadline: it times out as any
    task whose agent gave no final answer, and the message names the refused credential."""
    refuse_reads(monkeypatch)
    task = run_once(followed(task))
    assert (task.state, task.error["code"]) == (TaskState.WORKING, AUTH_FAILED)
    assert deadlines.expire_overdue() == 0  # within its deadline it waits
    Task.objects.filter(pk=task.pk).update(deadline_at=timezone.now() - timedelta(seconds=1))
    with django_capture_on_commit_callbacks(execute=True):
        assert deadlines.expire_overdue() == 1
    task.refresh_from_db()
    assert (task.state, task.error["code"]) == (TaskState.FAILED, "timeout")
    assert "refused the platform with its bearer credential: HTTP 401" in task.error["message"]


def test_a_batched_poll_refused_for_the_credential_waits_and_shows_in_health(
    task: Task, agent: AgentProfile
) -> None:
    """The sweep's batched polls (``a2a.engine``) take a refusal as the worker does: the
    task waits with the refusal, and the agent's health shows it."""
    task = followed(task)
    polled = engine.Polled(task, target_for(task.agent), error=A2AAuthError(REFUSED, status=401))
    engine._apply_one(polled)
    task.refresh_from_db()
    assert task.state == TaskState.WORKING
    assert task.error["code"] == AUTH_FAILED
    assert (task.next_action, task.lease_until) == (NextAction.POLL, None)
    assert task.next_poll_at > timezone.now()
    agent.refresh_from_db()
    assert (agent.last_call_ok, agent.last_call_code) == (False, AUTH_FAILED)


def test_a_poll_answered_again_clears_the_refusal_on_the_task_and_in_health(
    task: Task, agent: AgentProfile, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The token was put back at the agent (no change at the platform): the next poll
    that is answered clears the refusal on the task and in the agent's health."""
    refuse_reads(monkeypatch)
    task = run_once(followed(task))
    assert task.error["code"] == AUTH_FAILED
    working_task = {"id": "agent-task-1", "status": {"state": "TASK_STATE_WORKING"}}
    monkeypatch.setattr(agent_reads, "read_task", lambda *_: AgentReply(task=working_task))
    task = run_once(task)
    assert (task.state, task.error, task.next_action) == (
        TaskState.WORKING,
        None,
        NextAction.POLL,
    )
    agent.refresh_from_db()
    assert agent.last_call_ok is True


def test_a_subscribe_answered_again_clears_the_refusal_on_the_task_and_in_health(
    task: Task, agent: AgentProfile
) -> None:
    """The first event of a subscribe after a refused one clears the refusal on the task
    and in the agent's health, while the agent works on (a poll answered does the same)."""
    refused = {"code": AUTH_FAILED, "message": REFUSED, "details": {"httpStatus": 401}}
    task = followed(task, NextAction.FOLLOW, error=refused, metadata={"noPolling": "test"})
    record_call_outcome(agent, ok=False, code=AUTH_FAILED, message=REFUSED)
    still = {"id": "agent-task-1", "status": {"state": "TASK_STATE_WORKING"}}
    agent_streams.follow_events(
        task, target_for(task.agent), iter([AgentReply(task=still)]), sending=False
    )
    task.refresh_from_db()
    assert (task.state, task.error, task.next_action) == (
        TaskState.WORKING,
        None,
        NextAction.FOLLOW,
    )
    agent.refresh_from_db()
    assert agent.last_call_ok is True


def test_a_refused_subscribe_leaves_a_task_a_push_moved_meanwhile_and_lets_it_go(
    task: Task, agent: AgentProfile
) -> None:
    """The refusal comes back after the agent's push moved the task on (it asks a
    question now): the push's state and schedule stand, nothing is failed or written over,
    and the worker lets go of its claim at once instead of holding it for the stream's
    whole lease (a person's reply waits for no one)."""
    lease = timezone.now() + timedelta(seconds=300)
    task = followed(task, NextAction.FOLLOW, lease_until=lease, metadata={"noPolling": "test"})
    asked = {"state": TaskState.INPUT_REQUIRED, "next_action": NextAction.NONE}
    Task.objects.filter(pk=task.pk).update(**asked)  # the push, in another process

    def refused() -> Any:
        raise A2AAuthError(REFUSED, status=401)
        yield  # a generator, as a transport's subscribe is

    agent_streams.follow_events(task, target_for(task.agent), refused(), sending=False)
    task.refresh_from_db()
    assert (task.state, task.error, task.next_action) == (
        TaskState.INPUT_REQUIRED,
        None,
        NextAction.NONE,
    )
    assert task.lease_until is None


def test_a_new_credential_makes_only_the_tasks_refused_with_the_old_one_due(
    make_agent: Any,
    skill: Any,
    user: Any,
    hints: list[Any],
    django_capture_on_commit_callbacks: Any,
) -> None:
    """Due at once: the agent's polls and subscribes waiting on a refused credential.
    Left alone: its tasks waiting for another reason, one a worker holds (its call goes
    on), another agent's, and all of them when a save of the agent sets no credential."""
    agent = make_agent(skills=[skill], a2a_endpoint="http://127.0.0.1:9/")
    other = make_agent(skills=[skill], id="agent-two", a2a_endpoint="http://127.0.0.1:9/")
    later = timezone.now() + timedelta(seconds=60)
    refused = {"code": AUTH_FAILED, "message": "refused", "details": {"httpStatus": 401}}
    busy = {"code": "agent_unavailable", "message": "busy", "details": {"httpStatus": 503}}

    def waiting(action: str, error: Any, **fields: Any) -> Task:
        made = creation.create_task(
            skill_id="ce-review",
            input={"product": "lamp"},
            user=user,
            agent_id=fields.pop("agent_id", agent.pk),
        )
        return followed(made, action, next_poll_at=later, poll_interval=8.0, error=error, **fields)

    poll = waiting(NextAction.POLL, refused)
    follow = waiting(NextAction.FOLLOW, refused)
    transient = waiting(NextAction.POLL, busy)
    held = waiting(NextAction.POLL, refused, lease_until=later)
    elsewhere = waiting(NextAction.POLL, refused, agent_id=other.pk)

    # Saving the agent's other fields is no new credential: nothing would work better.
    with django_capture_on_commit_callbacks(execute=True):
        profile = AgentProfile.objects.get(pk=agent.pk)
        profile.name = "Agent One, renamed"
        profile.save()
        profile.save(update_fields=["name"])
    poll.refresh_from_db()
    assert (poll.next_poll_at, hints) == (later, [])

    with django_capture_on_commit_callbacks(execute=True):
        with_bearer(AgentProfile.objects.get(pk=agent.pk), "a-new-token")
    assert sorted(hints) == sorted([poll.pk, follow.pk])
    now = timezone.now()
    for task in (poll, follow):
        task.refresh_from_db()
        assert task.next_poll_at <= now
        assert task.poll_interval == 0.0
        assert task.error["code"] == AUTH_FAILED  # until a read says otherwise
    for task in (transient, held, elsewhere):
        task.refresh_from_db()
        assert (task.next_poll_at, task.poll_interval) == (later, 8.0)


def test_a_credential_set_in_the_admin_makes_the_refused_polls_due(
    task: Task,
    agent: AgentProfile,
    hints: list[Any],
    django_capture_on_commit_callbacks: Any,
    django_user_model: Any,
) -> None:
    """The operator's way: a new credential in the agent's admin editor."""
    later = timezone.now() + timedelta(seconds=60)
    refused = {"code": AUTH_FAILED, "message": "refused", "details": None}
    task = followed(task, next_poll_at=later, error=refused)
    staff = Client()
    staff.force_login(django_user_model.objects.create_superuser("admin", "a@example.com", "pw"))
    form = {
        "id": agent.pk,
        "name": agent.name,
        "status": "active",
        "a2a_endpoint": agent.a2a_endpoint,
        "metadata": "{}",
        "api_keys-TOTAL_FORMS": "0",
        "api_keys-INITIAL_FORMS": "0",
        "new_auth": json.dumps({"type": "bearer", "token": "rotated-token-5678"}),
    }
    with django_capture_on_commit_callbacks(execute=True):
        response = staff.post(f"/admin/agent_profiles/agentprofile/{agent.pk}/change/", form)
    assert response.status_code == 302
    task.refresh_from_db()
    assert task.next_poll_at <= timezone.now()
    assert hints == [task.pk]
