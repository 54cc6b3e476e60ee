"""The push webhook across a person's retry or reassign: the webhook's number is the task's
push serial (``Task.push_serial``), one more at every send and at every fresh attempt and
never back, so the old attempt's agent task is refused from the moment the retry or
reassign commits, not only once the new send is recorded, and an agent a task comes back
to never holds a valid token of an attempt it was given before. A fresh attempt also
drops the old attempt's status time (``metadata.agentStatusAt``): the new attempt's pushes
are not judged by another agent's clock. On SQLite and PostgreSQL (the webhook's locked
read is the database's)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import httpx
import pytest
from django.utils import timezone

from a2a import agent_push_tokens
from a2a.models import Task
from a2a.reassign import reassign_task
from a2a.services import retry_task
from a2a.states import NextAction, TaskState
from tests.a2a.helpers import done, fresh, post, push, status_update

T1 = "2026-12-01T10:00:01Z"
LATER = "2026-12-01T10:00:09Z"


def hook_push(task: Task, body: Any, config: dict[str, Any]) -> httpx.Response:
    """Push ``body`` to the webhook of ``config`` (a send's push config), with its token."""
    path = "/" + config["url"].split("://", 1)[1].split("/", 1)[1]
    return post(path, body, config["token"])


def sent(task: Task) -> dict[str, Any]:
    """What the worker's send records (one attempt more) and gives the agent: the push
    config of the attempt."""
    row = fresh(task)
    assert row.count_attempt()
    return agent_push_tokens.push_config(row)


def assert_stale(response: httpx.Response) -> None:
    assert response.status_code == 409, response.text
    assert response.json()["error"]["code"] == "stale_update"


def test_a_retried_attempts_push_is_refused_before_the_new_send(pushed_task: Task) -> None:
    """The platform timed the task out while the agent worked; a person retries. The old
    agent task's COMPLETED, pushed before the worker sends the new attempt, is refused:
    the retried attempt is not completed with the abandoned attempt's output, nor tied
    to its agent task."""
    task = pushed_task
    assert push(task, status_update("TASK_STATE_WORKING", T1)).status_code == 200
    assert fresh(task).fail("timeout", "Timed out", {}, next_action=NextAction.CANCEL)
    retry_task(fresh(task))

    assert_stale(push(task, done({"verdict": "pass"}, LATER), attempt=1))
    row = fresh(task)
    assert (row.state, row.output, row.remote_task_id) == (TaskState.SUBMITTED, None, "")

    # The new send's webhook is another one, and it is taken; the old one stays refused.
    config = sent(task)
    assert config["url"].endswith(f"/{task.agent_id}/3")
    assert_stale(push(task, done({"verdict": "pass"}, LATER), attempt=1))
    body = done({"verdict": "pass"}, LATER)
    body["task"]["id"] = "agent-task-2"
    answer = hook_push(task, body, config)
    assert answer.status_code == 200, answer.text
    assert (fresh(task).state, fresh(task).remote_task_id) == (TaskState.COMPLETED, "agent-task-2")


def test_a_failed_tasks_retry_refuses_the_old_webhook(pushed_task: Task) -> None:
    task = pushed_task
    assert push(task, status_update("TASK_STATE_FAILED", T1)).status_code == 200
    retry_task(fresh(task))
    for body in (done({"verdict": "pass"}, LATER), status_update("TASK_STATE_WORKING", LATER)):
        assert_stale(push(task, body, attempt=1))
    assert fresh(task).state == TaskState.SUBMITTED


@pytest.mark.parametrize("new_send", [False, True])
def test_an_agent_a_task_comes_back_to_cannot_use_its_old_token(
    pushed_task: Task, make_agent: Any, new_send: bool
) -> None:
    """Reassigned A -> B -> A: A's first attempt's webhook (attempt 1, as A's new first
    attempt is) is refused, before A's new send and after it."""
    task = pushed_task
    make_agent(skills=[task.skill], id="agent-two", name="Two")
    old = agent_push_tokens.push_config(task)
    reassign_task(fresh(task), agent_id="agent-two")
    reassign_task(fresh(task), agent_id="agent-one")
    row = fresh(task)
    assert (row.agent_id, row.attempts) == ("agent-one", 0)
    if new_send:
        new = sent(task)
        assert new["url"] != old["url"]
        assert new["token"] != old["token"]

    assert_stale(hook_push(task, done({"verdict": "pass"}, LATER), old))
    assert (fresh(task).state, fresh(task).output) == (TaskState.SUBMITTED, None)


def test_the_serial_only_goes_up_and_no_webhook_comes_back(
    pushed_task: Task, make_agent: Any
) -> None:
    """Sends, retries and reassigns in turn: every attempt's webhook is new, and each one
    before is refused."""
    task = pushed_task
    make_agent(skills=[task.skill], id="agent-two", name="Two")
    given = [agent_push_tokens.push_config(task)]  # the fixture's attempt 1
    serials = [fresh(task).push_serial]

    def fail() -> None:
        assert fresh(task).fail("agent_error", "it broke")

    steps = [
        fail,
        lambda: retry_task(fresh(task)),
        lambda: reassign_task(fresh(task), agent_id="agent-two"),
        lambda: reassign_task(fresh(task), agent_id="agent-one"),
        fail,
        lambda: retry_task(fresh(task)),
    ]
    for step in steps:
        step()
        serials.append(fresh(task).push_serial)
        if fresh(task).state == TaskState.SUBMITTED:
            given.append(sent(task))
            serials.append(fresh(task).push_serial)
    assert serials == sorted(serials)
    assert len({(c["url"], c["token"]) for c in given}) == len(given)
    for config in given[:-1]:
        assert_stale(hook_push(task, status_update("TASK_STATE_WORKING", LATER), config))
    answer = hook_push(task, status_update("TASK_STATE_WORKING", LATER), given[-1])
    assert answer.status_code == 200, answer.text


def test_a_tasks_webhook_of_before_the_serial_stays_valid(pushed_task: Task) -> None:
    """A task never retried nor reassigned (every task at the upgrade: ``push_offset``
    0) keeps the address it was given, numbered by its attempt."""
    task = pushed_task
    Task.objects.filter(pk=task.pk).update(attempts=3)
    row = fresh(task)
    assert (row.push_offset, row.push_serial) == (0, 3)
    assert agent_push_tokens.push_config(row)["url"].endswith(f"/{task.agent_id}/3")
    assert push(task, status_update("TASK_STATE_WORKING", T1), attempt=3).status_code == 200


def test_a_send_overtaken_by_a_retry_records_nothing(pushed_task: Task) -> None:
    """The worker read the task, then a person retried it: the old attempt's send counts
    no attempt on the new one and does not take its serial back (its agent gets no
    webhook: ``_start_attempt``)."""
    task = pushed_task
    assert fresh(task).fail("agent_error", "it broke")
    stale = Task.objects.get(pk=task.pk)  # as the worker's claim read it
    retry_task(fresh(task))
    before = fresh(task)
    assert not stale.count_attempt()
    after = fresh(task)
    assert (after.attempts, after.push_serial) == (before.attempts, before.push_serial)
    assert after.push_serial == 2


def test_the_serial_changes_only_through_its_verbs(pushed_task: Task) -> None:
    with pytest.raises(ValueError):
        fresh(pushed_task).note(push_offset=5)


def _clock_ahead(task: Task) -> None:
    """agent-one's clock runs 5 minutes ahead: its WORKING is stamped so."""
    ahead = (timezone.now() + timedelta(minutes=5)).isoformat()
    assert push(task, status_update("TASK_STATE_WORKING", ahead)).status_code == 200
    assert "agentStatusAt" in fresh(task).metadata


def _new_attempt_pushes(task: Task, remote: str) -> None:
    """The new attempt's agent, its clock right, pushes WORKING then COMPLETED: applied."""
    config = sent(task)
    now = timezone.now()
    working = status_update("TASK_STATE_WORKING", (now + timedelta(seconds=1)).isoformat())
    working["statusUpdate"]["taskId"] = remote
    answer = hook_push(task, working, config)
    assert answer.status_code == 200, answer.text
    completed = done({"verdict": "pass"}, (now + timedelta(seconds=2)).isoformat())
    completed["task"]["id"] = remote
    answer = hook_push(task, completed, config)
    assert answer.status_code == 200, answer.text
    assert fresh(task).state == TaskState.COMPLETED


def test_a_reassigned_task_drops_the_old_agents_status_time(
    pushed_task: Task, make_agent: Any
) -> None:
    task = pushed_task
    make_agent(skills=[task.skill], id="agent-two", name="Two")
    _clock_ahead(task)
    reassign_task(fresh(task), agent_id="agent-two")
    assert "agentStatusAt" not in fresh(task).metadata
    _new_attempt_pushes(task, "two-task")


def test_a_retried_task_drops_the_old_attempts_status_time(pushed_task: Task) -> None:
    task = pushed_task
    _clock_ahead(task)
    assert fresh(task).fail("agent_error", "it broke")
    retry_task(fresh(task))
    assert "agentStatusAt" not in fresh(task).metadata
    _new_attempt_pushes(task, "agent-task-2")
