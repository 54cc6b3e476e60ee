"""Dispatcher business rules without a network: people's actions (reply, cancel, retry)
and the send-failure policy."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from a2a import agent_updates, creation, send_failures, services
from a2a.exceptions import (
    A2ACallError,
    A2APermanentError,
    A2AProtocolError,
    A2ATransientError,
)
from a2a.models import InvalidTransition, Task
from a2a.send_failures import handle_send_failure
from a2a.states import NextAction, TaskState
from a2a.worker import process_task
from platform_site.errors import ValidationFailed
from tests.a2a.helpers import working

pytestmark = pytest.mark.django_db


# --- people's actions ---------------------------------------------------------------


def _ask(task: Task) -> Task:
    working(task)
    question = {"messageId": "q1", "role": "ROLE_AGENT", "parts": [{"text": "EU or UK?"}]}
    agent_updates.apply_agent_update(
        task, status={"state": "input-required", "message": question}, via="a2a"
    )
    task.refresh_from_db()
    return task


def test_a_reply_goes_out_on_the_same_task_and_context(task: Task) -> None:
    _ask(task)
    services.reply_to_task(task, text="EU", data={"market": "EU"})
    task.refresh_from_db()
    assert task.state == TaskState.WORKING
    assert task.question is None
    assert task.next_action == NextAction.SEND
    out = task.outbound_message
    assert (out["taskId"], out["contextId"]) == ("r-1", "c-1")
    assert out["parts"] == [{"text": "EU"}, {"data": {"market": "EU"}}]


def test_a_reply_to_a_task_not_waiting_is_refused(task: Task) -> None:
    with pytest.raises(InvalidTransition):
        services.reply_to_task(task, text="hello")
    task.refresh_from_db()
    assert task.state == TaskState.SUBMITTED


def test_an_empty_reply_is_refused(task: Task) -> None:
    _ask(task)
    with pytest.raises(ValidationFailed):
        services.reply_to_task(task)
    task.refresh_from_db()
    assert task.state == TaskState.INPUT_REQUIRED


def test_cancel_schedules_the_remote_cancel(task: Task) -> None:
    working(task)
    services.cancel_task(task)
    task.refresh_from_db()
    assert task.state == TaskState.CANCELED
    assert task.next_action == NextAction.CANCEL


def test_cancel_before_the_agent_has_it_needs_no_remote_cancel(task: Task) -> None:
    services.cancel_task(task)
    task.refresh_from_db()
    assert (task.state, task.next_action) == (TaskState.CANCELED, NextAction.NONE)


def test_cancel_of_a_finished_task_is_refused(task: Task) -> None:
    task.fail("x", "boom")
    with pytest.raises(InvalidTransition):
        services.cancel_task(task)
    task.refresh_from_db()
    assert task.state == TaskState.FAILED


def test_a_cancel_of_a_task_that_moved_on_meanwhile_cancels_it(task: Task) -> None:
    # The caller read the task SUBMITTED; the worker sent it and the agent answered
    # WORKING before the cancel's write. The person's cancel still stands.
    elsewhere = Task.objects.get(pk=task.pk)
    working(elsewhere)
    services.cancel_task(task)
    task.refresh_from_db()
    assert task.state == TaskState.CANCELED
    assert task.next_action == NextAction.CANCEL  # the agent has it now: told
    assert list(task.events.order_by("id").values_list("from_state", "to_state"))[-1] == (
        TaskState.WORKING,
        TaskState.CANCELED,
    )


def test_a_cancel_of_a_task_that_finished_meanwhile_is_refused(task: Task) -> None:
    elsewhere = Task.objects.get(pk=task.pk)
    elsewhere.fail("x", "boom")
    with pytest.raises(InvalidTransition, match="a final state"):
        services.cancel_task(task)
    task.refresh_from_db()
    assert task.state == TaskState.FAILED


def test_retry_of_a_running_task_is_refused(task: Task) -> None:
    working(task)
    with pytest.raises(InvalidTransition):
        services.retry_task(task)
    task.refresh_from_db()
    assert task.state == TaskState.WORKING


def test_retry_sends_a_new_message_to_a_new_agent_task(task: Task) -> None:
    working(task)
    first_id = task.outbound_message["messageId"]
    agent_updates.apply_agent_update(task, status={"state": "failed"}, via="a2a")
    services.retry_task(task)
    task.refresh_from_db()
    assert task.state == TaskState.SUBMITTED
    assert task.error is None
    assert task.remote_task_id == ""
    assert task.next_action == NextAction.SEND
    assert task.outbound_message["messageId"] != first_id
    assert "taskId" not in task.outbound_message
    assert len(task.metadata["retries"]) == 1


# --- send failures --------------------------------------------------------------------


def test_a_transient_send_failure_is_retried_with_backoff(task: Task, settings: Any) -> None:
    settings.A2A_RETRY_BACKOFF = 2.0
    before = timezone.now()
    send_failures.handle_send_failure(task, A2ATransientError("down", code="agent_unreachable"))
    task.refresh_from_db()
    assert task.state == TaskState.SUBMITTED
    assert task.next_action == NextAction.SEND
    assert task.next_poll_at >= before + timedelta(seconds=2)
    assert task.error["code"] == "agent_unreachable"
    assert task.metadata["sendFailures"] == 1


def test_retry_after_wins_when_longer(task: Task, settings: Any) -> None:
    settings.A2A_RETRY_BACKOFF = 0.1
    before = timezone.now()
    send_failures.handle_send_failure(task, A2ATransientError("busy", status=429, retry_after=30))
    task.refresh_from_db()
    assert task.next_poll_at >= before + timedelta(seconds=30)


def test_transient_failures_fall_back_to_the_gateway_when_attempts_run_out(
    task: Task, skill: Any, settings: Any
) -> None:
    skill.max_attempts = 2
    skill.save()
    task.skill.max_attempts = 2
    send_failures.handle_send_failure(task, A2ATransientError("down"))
    send_failures.handle_send_failure(task, A2ATransientError("still down"))
    task.refresh_from_db()
    assert (task.state, task.transport) == (TaskState.SUBMITTED, "offline")
    assert task.next_action == NextAction.NONE
    (fallback,) = task.metadata["fallbacks"]
    assert (fallback["from"], fallback["to"]) == ("a2a", "offline")
    assert "still down" in fallback["reason"]


def test_a_permanent_failure_falls_back_to_the_gateway_at_once(task: Task) -> None:
    send_failures.handle_send_failure(task, A2APermanentError("nope", status=400))
    task.refresh_from_db()
    assert (task.state, task.transport) == (TaskState.SUBMITTED, "offline")
    assert "HTTP 400" in task.metadata["fallbacks"][0]["reason"]
    assert "agent_refused" in task.metadata["fallbacks"][0]["reason"]


def test_an_answer_the_agent_refuses_goes_back_to_the_person(task: Task) -> None:
    """A reply refused for what it says (HTTP 400, a JSON-RPC error such as -32602): the
    question stands at the agent, so the task waits for a person again, with the
    question and why; not the gateway, which a reply refused so would wait on."""
    asked = _ask(task).question
    services.reply_to_task(task, text="maybe")
    send_failures.handle_send_failure(task, A2APermanentError("Invalid params", status=400))
    task.refresh_from_db()
    assert (task.state, task.transport, task.question) == (
        TaskState.INPUT_REQUIRED,
        "a2a",
        asked,
    )
    assert task.error["code"] == "agent_refused"
    assert task.error["message"] == "The agent refused the answer; answer again. Invalid params"
    assert task.next_action == NextAction.NONE
    services.reply_to_task(task, text="EU")
    task.refresh_from_db()
    assert task.outbound_message["parts"] == [{"text": "EU"}]


@pytest.mark.parametrize(
    "error",
    [
        A2APermanentError("gone", code="remote_task_not_found", status=404),
        A2APermanentError("no such endpoint", status=404),
        A2APermanentError("who?", code="agent_auth_failed", status=401),
    ],
)
def test_a_reply_refused_for_another_reason_still_goes_to_the_gateway(
    task: Task, error: A2ACallError
) -> None:
    _ask(task)
    services.reply_to_task(task, text="EU")
    send_failures.handle_send_failure(task, error)
    task.refresh_from_db()
    assert (task.state, task.transport) == (TaskState.WORKING, "offline")


def test_an_answer_that_is_not_a2a_fails_at_once(task: Task) -> None:
    send_failures.handle_send_failure(task, A2AProtocolError("html"))
    task.refresh_from_db()
    assert (task.state, task.error["code"]) == (TaskState.FAILED, "not_a2a")
    assert task.transport == "a2a"


@pytest.mark.parametrize(
    "error",
    [A2ATransientError("no answer", code="agent_timeout"), A2AProtocolError("html")],
    ids=["retried", "failing"],
)
def test_a_failed_send_the_agent_pushed_about_meanwhile_is_let_go_at_once(
    task: Task, error: A2ACallError
) -> None:
    """The send failed (no answer in time, or one that is not A2A), but meanwhile the
    agent pushed its task on (WORKING, with its task id). The failure is not written over
    the push, and the claim is let go at once: a worker takes the task up from where it
    is and follows it, with no second send, instead of leaving it held until the claim's
    lease runs out."""
    claimed = Task.claim(task.pk)
    assert claimed is not None
    assert claimed.lease_until is not None
    claimed.note(attempts=1)
    working(Task.objects.get(pk=task.pk))  # the agent's push, in another thread

    handle_send_failure(claimed, error)

    task.refresh_from_db()
    assert (task.state, task.remote_task_id, task.error) == (TaskState.WORKING, "r-1", None)
    assert task.lease_until is None
    process_task(task.pk)  # what the hint (or the next sweep) does
    task.refresh_from_db()
    assert (task.next_action, task.attempts) == (NextAction.POLL, 1)


def test_a_failed_send_leaves_another_workers_later_claim_alone(task: Task) -> None:
    """The send outlived this worker's lease; meanwhile the agent pushed the task on and
    another worker claimed it. Letting go of the claim must not clear that one."""
    claimed = Task.claim(task.pk)
    assert claimed is not None
    claimed.note(attempts=1)
    working(Task.objects.get(pk=task.pk))  # the agent's push
    Task.objects.filter(pk=task.pk).update(lease_until=timezone.now() - timedelta(seconds=1))
    other = Task.claim(task.pk)  # the lease ran out: another worker takes the task
    assert other is not None

    handle_send_failure(claimed, A2ATransientError("no answer", code="agent_timeout"))

    task.refresh_from_db()
    assert task.lease_until == other.lease_until
    assert (task.state, task.error) == (TaskState.WORKING, None)


def test_a_retry_past_the_deadline_falls_back_to_the_gateway(task: Task, settings: Any) -> None:
    settings.A2A_RETRY_BACKOFF = 600
    send_failures.handle_send_failure(task, A2ATransientError("slow", code="agent_timeout"))
    task.refresh_from_db()
    assert (task.state, task.transport) == (TaskState.SUBMITTED, "offline")
    assert "agent_timeout" in task.metadata["fallbacks"][0]["reason"]


def test_retry_of_a_relayed_task_resends_the_callers_first_message(skill: Any, agent: Any) -> None:
    message = {"messageId": "m1", "role": "ROLE_USER", "parts": [{"text": "review my lamp"}]}
    task = creation.create_task(
        skill_id=skill.id, input=None, message=message, origin="a2a", validate_input=False
    )
    _ask(task)
    services.reply_to_task(task, message={"messageId": "m2", "parts": [{"text": "EU"}]})
    agent_updates.apply_agent_update(task, status={"state": "failed"}, via="a2a")
    services.retry_task(task)
    task.refresh_from_db()
    assert task.outbound_message["parts"] == [{"text": "review my lamp"}]
    assert task.outbound_message["messageId"] not in {"m1", "m2"}
    assert "taskId" not in task.outbound_message


def test_a_json_rpc_refusal_of_an_answer_goes_back_to_the_person(task: Task) -> None:
    """A JSON-RPC error comes with HTTP 200 (no status on the error)."""
    _ask(task)
    services.reply_to_task(task, text="maybe")
    send_failures.handle_send_failure(task, A2APermanentError("-32602: Invalid params"))
    task.refresh_from_db()
    assert (task.state, task.transport) == (TaskState.INPUT_REQUIRED, "a2a")
