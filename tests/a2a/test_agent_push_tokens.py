"""The push webhook's addresses and tokens: one per task, agent and attempt, an HMAC
checked before anything is read; a token of another task, attempt or agent (the one a
reassigned task was taken from) is refused and changes nothing. An address of the form
given out before an upgrade has its task polled at once, and nothing more."""

from __future__ import annotations

import uuid
from dataclasses import replace
from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from a2a import agent_push_tokens
from a2a.models import Task
from a2a.reassign import reassign_task
from a2a.states import NextAction, TaskState
from tests.a2a.helpers import done, fresh, post, push, status_update


@pytest.fixture
def task(pushed_task: Task) -> Task:
    return pushed_task


def test_the_push_config_names_a_webhook_and_token_per_task(task: Task, settings: Any) -> None:
    settings.PUBLIC_URL = "https://platform.example"
    config = agent_push_tokens.push_config(task)
    assert config["url"] == f"https://platform.example/api/a2a/push/{task.pk}/{task.agent_id}/1"
    assert config["token"] == config["authentication"]["credentials"]
    assert config["authentication"]["scheme"] == "Bearer"
    assert config["token"] != agent_push_tokens.token_for(task.pk, task.agent_id, 2)
    assert config["token"] != agent_push_tokens.token_for(task.pk, "another-agent", 1)


def test_tokens_are_djangos_salted_hmac_and_follow_the_secret_key(settings: Any) -> None:
    """The same tokens as Django's salted_hmac, and a new SECRET_KEY makes new ones (the
    derived key is not kept stale)."""
    from django.utils.crypto import salted_hmac

    task_id = "3f2b6c1e-0000-4000-8000-000000000001"
    for secret in ("first-secret", "second-secret"):
        settings.SECRET_KEY = secret
        expected = salted_hmac(
            "a2a.agent_push", f"{task_id}:agent-one:3", secret=secret, algorithm="sha256"
        ).hexdigest()
        assert agent_push_tokens.token_for(task_id, "agent-one", 3) == expected
        hook = agent_push_tokens.Hook(uuid.UUID(task_id), "agent-one", 3)
        assert agent_push_tokens.token_matches(hook, expected)
        assert not agent_push_tokens.token_matches(replace(hook, attempt=2), expected)
        assert not agent_push_tokens.token_matches(replace(hook, agent_id="agent-two"), expected)


def test_the_token_may_come_as_a_bearer_header(task: Task) -> None:
    token = agent_push_tokens.token_for(task.pk, task.agent_id, 1)
    response = post(
        f"/api/a2a/push/{task.pk}/{task.agent_id}/1",
        status_update("TASK_STATE_WORKING"),
        None,
        headers={"Authorization": f"Bearer {token}"},
    )
    assert response.status_code == 200


@pytest.mark.parametrize("token", [None, "nope", "x" * 64])
def test_a_missing_or_forged_token_is_refused(task: Task, token: str | None) -> None:
    response = push(task, status_update("TASK_STATE_WORKING"), token=token)
    assert response.status_code == 401
    assert response.json()["error"]["code"] == "unauthorized"
    assert fresh(task).state == TaskState.SUBMITTED


def test_another_tasks_token_is_refused(task: Task) -> None:
    other = Task.objects.create(skill=task.skill, agent=task.agent, attempts=1)
    response = push(
        task,
        status_update("TASK_STATE_WORKING"),
        token=agent_push_tokens.token_for(other.pk, other.agent_id, 1),
    )
    assert response.status_code == 401
    assert fresh(task).state == TaskState.SUBMITTED


def test_an_unknown_task_is_a_404(task: Task) -> None:
    ghost = uuid.uuid4()
    token = agent_push_tokens.token_for(ghost, task.agent_id, 1)
    path = f"/api/a2a/push/{ghost}/{task.agent_id}/1"
    response = post(path, status_update("TASK_STATE_WORKING"), token)
    assert response.status_code == 404


def test_an_earlier_attempts_webhook_is_stale(task: Task) -> None:
    Task.objects.filter(pk=task.pk).update(attempts=2)
    response = push(task, status_update("TASK_STATE_WORKING"), attempt=1)
    assert response.status_code == 409
    assert response.json()["error"]["code"] == "stale_update"


@pytest.mark.parametrize("new_endpoint", ["", "http://127.0.0.1:9/new"])
def test_the_agent_a_task_was_reassigned_from_cannot_push_to_it(
    task: Task, make_agent: Any, new_endpoint: str
) -> None:
    """Attempts count from 1 again after a reassignment: the agent the task was taken from
    still holds its attempt-1 webhook, which must not reach the task now (a gateway agent's
    task stays at attempt 0, checked as 1; an HTTP agent's first send is attempt 1)."""
    old = agent_push_tokens.push_config(task)
    make_agent(id="agent-new", skills=[task.skill], a2a_endpoint=new_endpoint)
    reassign_task(task, agent_id="agent-new")
    Task.objects.filter(pk=task.pk).update(attempts=1 if new_endpoint else 0)
    task.refresh_from_db()
    new = agent_push_tokens.push_config(task)
    assert (new["url"], new["token"]) != (old["url"], old["token"])

    path = "/" + old["url"].split("://", 1)[1].split("/", 1)[1]
    response = post(path, done({"verdict": "pass"}), old["token"])
    assert response.status_code == 409, response.text
    assert response.json()["error"]["code"] == "stale_update"
    assert fresh(task).state != TaskState.COMPLETED
    assert fresh(task).output is None


def _legacy_token(task_id: Any, attempt: int) -> str:
    """The token given out with the webhook addresses of before the agent was part of
    them (``/api/a2a/push/{taskId}/{attempt}``): Django's salted HMAC of "task:attempt"."""
    from django.utils.crypto import salted_hmac

    return salted_hmac("a2a.agent_push", f"{task_id}:{attempt}", algorithm="sha256").hexdigest()


def test_a_push_to_an_address_of_before_an_upgrade_has_the_task_polled_at_once(
    task: Task,
) -> None:
    """Agents that took a task before the upgrade push to its old address. The body is not
    applied (its token would be valid for another agent's attempt 1 after a reassignment),
    but the task is polled at once: before, the push was a 404 and the task's end waited
    for its safety-net poll, backed off to minutes."""
    later = timezone.now() + timedelta(seconds=600)
    Task.objects.filter(pk=task.pk).update(
        state=TaskState.WORKING, next_action=NextAction.POLL, next_poll_at=later
    )
    response = post(
        f"/api/a2a/push/{task.pk}/1", done({"verdict": "pass"}), _legacy_token(task.pk, 1)
    )
    assert response.status_code == 202
    assert response.json() == {"state": TaskState.WORKING, "readBack": True}
    task = fresh(task)
    assert task.state == TaskState.WORKING  # the body was not applied
    assert (task.next_action, task.next_poll_at <= timezone.now()) == (NextAction.POLL, True)


def test_an_address_of_before_an_upgrade_takes_only_its_own_token(task: Task) -> None:
    later = timezone.now() + timedelta(seconds=600)
    Task.objects.filter(pk=task.pk).update(next_action=NextAction.POLL, next_poll_at=later)
    for token in (
        agent_push_tokens.token_for(task.pk, task.agent_id, 1),  # today's token
        _legacy_token(task.pk, 2),  # another attempt's
        _legacy_token(uuid.uuid4(), 1),  # another task's
    ):
        response = post(f"/api/a2a/push/{task.pk}/1", done({"verdict": "pass"}), token)
        assert response.status_code == 401
    assert fresh(task).next_poll_at == later


def test_a_push_to_an_old_address_leaves_a_waiting_send_as_it_is(task: Task) -> None:
    """A person's reply waiting out its retry backoff (its send due later): a push to the
    old address, the agent's or one of the agent the task was taken from, must not turn
    the send into a poll (the reply was lost)."""
    later = timezone.now() + timedelta(seconds=30)
    Task.objects.filter(pk=task.pk).update(
        state=TaskState.WORKING, next_action=NextAction.SEND, next_poll_at=later
    )
    response = post(
        f"/api/a2a/push/{task.pk}/1", done({"verdict": "pass"}), _legacy_token(task.pk, 1)
    )
    assert response.status_code == 202
    task = fresh(task)
    assert (task.next_action, task.next_poll_at) == (NextAction.SEND, later)


def test_a_push_to_an_old_address_of_a_deleted_task_is_a_404(task: Task) -> None:
    """A task deleted since (retention): the same 404 as on today's addresses, not a 500
    with a traceback at every push."""
    gone = uuid.uuid4()
    response = post(f"/api/a2a/push/{gone}/1", done({"verdict": "pass"}), _legacy_token(gone, 1))
    assert response.status_code == 404
    assert response.json()["error"]["code"] == "not_found"
