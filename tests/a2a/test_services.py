"""Dispatcher business rules without a network: creation, the status mapping, people's
actions and the send-failure policy."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from a2a import services
from a2a.exceptions import (
    A2APermanentError,
    A2AProtocolError,
    A2ATransientError,
    InputInvalid,
    NoAgentAvailable,
    UnknownAgent,
    UnknownSkill,
)
from a2a.models import Direction, InvalidTransition, Task, TaskEvent, TaskMessage
from a2a.states import NextAction, TaskState
from platform_site.errors import Conflict, ValidationFailed

pytestmark = pytest.mark.django_db


@pytest.fixture
def skill(make_skill: Any) -> Any:
    return make_skill()


@pytest.fixture
def agent(make_agent: Any, skill: Any) -> Any:
    return make_agent(skills=[skill])


@pytest.fixture
def user(make_user: Any) -> Any:
    return make_user()


@pytest.fixture
def task(skill: Any, agent: Any, user: Any) -> Task:
    return services.create_task(skill_id=skill.id, input={"product": "lamp"}, user=user)


def _working(task: Task) -> Task:
    services.apply_agent_update(
        task,
        status={"state": "TASK_STATE_WORKING"},
        remote={"id": "r-1", "contextId": "c-1"},
        via="a2a",
    )
    return task


# --- creation -----------------------------------------------------------------------


def test_it_creates_a_submitted_task_with_a_stable_outbound_message(task: Task) -> None:
    assert task.state == TaskState.SUBMITTED
    assert task.next_action == NextAction.SEND
    assert task.next_poll_at is not None
    assert task.deadline_at is not None
    message = task.outbound_message
    assert message["role"] == "ROLE_USER"
    assert message["parts"] == [{"data": {"product": "lamp"}}]
    assert message["metadata"] == {"skillId": "ce-review"}
    assert message["messageId"]
    assert task.metadata["match"]["agentId"] == "agent-one"
    assert task.metadata["fallbacks"] == []
    assert list(TaskEvent.objects.filter(task=task).values_list("to_state", flat=True)) == [
        TaskState.SUBMITTED
    ]
    stored = TaskMessage.objects.get(task=task)
    assert (stored.direction, stored.message_id) == (Direction.TO_AGENT, message["messageId"])


def test_it_refuses_an_unknown_skill(agent: Any, user: Any) -> None:
    with pytest.raises(UnknownSkill):
        services.create_task(skill_id="nope", input={}, user=user)
    assert not Task.objects.exists()


def test_it_refuses_an_inactive_skill(skill: Any, agent: Any, user: Any) -> None:
    skill.is_active = False
    skill.save()
    with pytest.raises(UnknownSkill):
        services.create_task(skill_id=skill.id, input={"product": "x"}, user=user)


def test_it_refuses_input_that_fails_the_schema(skill: Any, agent: Any, user: Any) -> None:
    with pytest.raises(InputInvalid) as info:
        services.create_task(skill_id=skill.id, input={"market": 3}, user=user)
    paths = {e["path"] for e in info.value.details["errors"]}
    assert paths == {"(root)", "market"}
    assert not Task.objects.exists()


def test_it_skips_input_validation_when_asked(skill: Any, agent: Any, user: Any) -> None:
    task = services.create_task(skill_id=skill.id, input={}, user=user, validate_input=False)
    assert task.state == TaskState.SUBMITTED


def test_it_refuses_an_unknown_or_unfit_agent(
    skill: Any, agent: Any, user: Any, make_agent: Any, make_skill: Any
) -> None:
    with pytest.raises(UnknownAgent):
        services.create_task(skill_id=skill.id, input={"product": "x"}, agent_id="ghost", user=user)
    make_agent(id="other", skills=[make_skill(id="other-skill")])
    with pytest.raises(UnknownAgent, match="does not offer"):
        services.create_task(skill_id=skill.id, input={"product": "x"}, agent_id="other", user=user)
    agent.status = "disabled"
    agent.save()
    with pytest.raises(UnknownAgent, match="disabled"):
        services.create_task(
            skill_id=skill.id, input={"product": "x"}, agent_id=agent.id, user=user
        )
    assert not Task.objects.exists()


def test_it_says_so_when_no_agent_offers_the_skill(skill: Any, user: Any) -> None:
    with pytest.raises(NoAgentAvailable, match="No active agent offers"):
        services.create_task(skill_id=skill.id, input={"product": "x"}, user=user)


def test_an_idempotency_key_returns_the_first_task(skill: Any, agent: Any, user: Any) -> None:
    first = services.create_task(
        skill_id=skill.id, input={"product": "x"}, user=user, idempotency_key="k1"
    )
    again = services.create_task(
        skill_id=skill.id, input={"product": "x"}, user=user, idempotency_key="k1"
    )
    assert (first.created, again.created) == (True, False)
    assert again.pk == first.pk
    assert Task.objects.count() == 1


def test_an_idempotency_key_reused_for_another_request_conflicts(
    skill: Any, agent: Any, user: Any
) -> None:
    services.create_task(skill_id=skill.id, input={"product": "x"}, user=user, idempotency_key="k")
    with pytest.raises(Conflict):
        services.create_task(
            skill_id=skill.id, input={"product": "y"}, user=user, idempotency_key="k"
        )


def test_idempotency_keys_are_per_user(skill: Any, agent: Any, make_user: Any) -> None:
    alice, bob = make_user("alice"), make_user("bob")
    a = services.create_task(
        skill_id=skill.id, input={"product": "x"}, user=alice, idempotency_key="k"
    )
    b = services.create_task(
        skill_id=skill.id, input={"product": "x"}, user=bob, idempotency_key="k"
    )
    assert a.pk != b.pk


def test_a_relayed_message_goes_out_unchanged(skill: Any, agent: Any) -> None:
    message = {
        "messageId": "client-1",
        "role": "ROLE_USER",
        "parts": [{"text": "hi"}],
        "metadata": {"skillId": "ce-review", "x": 1},
        "contextId": "ctx-9",
    }
    task = services.create_task(
        skill_id=skill.id, input=None, message=message, origin="a2a", validate_input=False
    )
    assert task.outbound_message == message
    assert task.context_id == "ctx-9"


# --- the status mapping ---------------------------------------------------------------


def test_working_keeps_following_and_records_remote_ids(task: Task) -> None:
    _working(task)
    task.refresh_from_db()
    assert task.state == TaskState.WORKING
    assert (task.remote_task_id, task.remote_context_id) == ("r-1", "c-1")


def test_completed_with_valid_output_completes(task: Task) -> None:
    artifacts = [{"artifactId": "a", "parts": [{"data": {"verdict": "pass"}}], "extra": 1}]
    services.apply_agent_update(
        task, status={"state": "TASK_STATE_COMPLETED"}, artifacts=artifacts, via="a2a"
    )
    task.refresh_from_db()
    assert task.state == TaskState.COMPLETED
    assert task.output == {"verdict": "pass"}
    assert task.artifacts == artifacts


def test_completed_with_invalid_output_fails_keeping_the_errors(task: Task) -> None:
    artifacts = [{"artifactId": "a", "parts": [{"data": {"verdict": "maybe"}}]}]
    services.apply_agent_update(
        task, status={"state": "TASK_STATE_COMPLETED"}, artifacts=artifacts, via="a2a"
    )
    task.refresh_from_db()
    assert task.state == TaskState.FAILED
    assert task.error["code"] == "output_invalid"
    assert task.error["details"]["errors"][0]["path"] == "verdict"
    assert task.output is None
    assert task.artifacts == artifacts


def test_completed_without_data_fails_as_invalid_output(task: Task) -> None:
    services.apply_agent_update(task, status={"state": "completed"}, artifacts=[], via="a2a")
    task.refresh_from_db()
    assert (task.state, task.error["code"]) == (TaskState.FAILED, "output_invalid")


def test_it_reads_legacy_states_kinds_and_json_text_parts(task: Task) -> None:
    artifacts = [{"kind": "artifact", "parts": [{"kind": "text", "text": '{"verdict": "fail"}'}]}]
    services.apply_agent_update(task, status={"state": "completed"}, artifacts=artifacts, via="x")
    task.refresh_from_db()
    assert (task.state, task.output) == (TaskState.COMPLETED, {"verdict": "fail"})


def test_several_data_artifacts_are_merged(task: Task) -> None:
    artifacts = [
        {"parts": [{"data": {"verdict": "fail"}}]},
        {"parts": [{"data": {"verdict": "pass", "notes": "ok"}}]},
    ]
    services.apply_agent_update(task, status={"state": "completed"}, artifacts=artifacts, via="x")
    task.refresh_from_db()
    assert task.output == {"verdict": "pass", "notes": "ok"}


def test_input_required_stores_the_question_and_pauses(task: Task) -> None:
    question = {"messageId": "q1", "role": "ROLE_AGENT", "parts": [{"text": "EU or UK?"}]}
    _working(task)
    services.apply_agent_update(
        task, status={"state": "TASK_STATE_INPUT_REQUIRED", "message": question}, via="a2a"
    )
    task.refresh_from_db()
    assert task.state == TaskState.INPUT_REQUIRED
    assert task.question == question
    assert task.next_action == NextAction.NONE
    # the same status polled again is not stored twice
    services.apply_agent_update(
        task, status={"state": "TASK_STATE_INPUT_REQUIRED", "message": question}, via="a2a"
    )
    assert TaskMessage.objects.filter(task=task, direction=Direction.FROM_AGENT).count() == 1


def test_auth_required_is_an_interruption_too(task: Task) -> None:
    services.apply_agent_update(task, status={"state": "auth-required"}, via="a2a")
    task.refresh_from_db()
    assert task.state == TaskState.AUTH_REQUIRED


@pytest.mark.parametrize(
    ("state", "expected", "code"),
    [
        ("TASK_STATE_FAILED", TaskState.FAILED, "agent_failed"),
        ("rejected", TaskState.REJECTED, "rejected"),
        ("TASK_STATE_CANCELED", TaskState.CANCELED, None),
    ],
)
def test_final_agent_states_map_to_our_verbs(
    task: Task, state: str, expected: str, code: str | None
) -> None:
    message = {"messageId": "m", "role": "ROLE_AGENT", "parts": [{"text": "because"}]}
    services.apply_agent_update(task, status={"state": state, "message": message}, via="a2a")
    task.refresh_from_db()
    assert task.state == expected
    assert (task.error or {}).get("code") == code
    if code:
        assert "because" in task.error["message"]


def test_an_unknown_state_is_a_protocol_error(task: Task) -> None:
    with pytest.raises(A2AProtocolError):
        services.apply_agent_update(task, status={"state": "exploded"}, via="a2a")
    task.refresh_from_db()
    assert task.state == TaskState.SUBMITTED


def test_news_after_the_end_changes_nothing(task: Task) -> None:
    services.cancel_task(task)
    services.apply_agent_update(
        task,
        status={"state": "completed"},
        artifacts=[{"parts": [{"data": {"verdict": "pass"}}]}],
        via="a2a",
    )
    task.refresh_from_db()
    assert task.state == TaskState.CANCELED
    assert task.output is None


# --- people's actions ---------------------------------------------------------------


def _ask(task: Task) -> Task:
    _working(task)
    question = {"messageId": "q1", "role": "ROLE_AGENT", "parts": [{"text": "EU or UK?"}]}
    services.apply_agent_update(
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
    _working(task)
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


def test_retry_of_a_running_task_is_refused(task: Task) -> None:
    _working(task)
    with pytest.raises(InvalidTransition):
        services.retry_task(task)
    task.refresh_from_db()
    assert task.state == TaskState.WORKING


def test_retry_sends_a_new_message_to_a_new_agent_task(task: Task) -> None:
    _working(task)
    first_id = task.outbound_message["messageId"]
    services.apply_agent_update(task, status={"state": "failed"}, via="a2a")
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
    services.handle_send_failure(task, A2ATransientError("down", code="agent_unreachable"))
    task.refresh_from_db()
    assert task.state == TaskState.SUBMITTED
    assert task.next_action == NextAction.SEND
    assert task.next_poll_at >= before + timedelta(seconds=2)
    assert task.error["code"] == "agent_unreachable"
    assert task.metadata["sendFailures"] == 1


def test_retry_after_wins_when_longer(task: Task, settings: Any) -> None:
    settings.A2A_RETRY_BACKOFF = 0.1
    before = timezone.now()
    services.handle_send_failure(task, A2ATransientError("busy", status=429, retry_after=30))
    task.refresh_from_db()
    assert task.next_poll_at >= before + timedelta(seconds=30)


def test_transient_failures_fall_back_to_the_gateway_when_attempts_run_out(
    task: Task, skill: Any, settings: Any
) -> None:
    skill.max_attempts = 2
    skill.save()
    task.skill.max_attempts = 2
    services.handle_send_failure(task, A2ATransientError("down"))
    services.handle_send_failure(task, A2ATransientError("still down"))
    task.refresh_from_db()
    assert (task.state, task.transport) == (TaskState.SUBMITTED, "offline")
    assert task.next_action == NextAction.NONE
    (fallback,) = task.metadata["fallbacks"]
    assert (fallback["from"], fallback["to"]) == ("a2a", "offline")
    assert "still down" in fallback["reason"]


def test_a_permanent_failure_falls_back_to_the_gateway_at_once(task: Task) -> None:
    services.handle_send_failure(task, A2APermanentError("nope", status=400))
    task.refresh_from_db()
    assert (task.state, task.transport) == (TaskState.SUBMITTED, "offline")
    assert "HTTP 400" in task.metadata["fallbacks"][0]["reason"]
    assert "agent_refused" in task.metadata["fallbacks"][0]["reason"]


def test_an_answer_that_is_not_a2a_fails_at_once(task: Task) -> None:
    services.handle_send_failure(task, A2AProtocolError("html"))
    task.refresh_from_db()
    assert (task.state, task.error["code"]) == (TaskState.FAILED, "not_a2a")
    assert task.transport == "a2a"


def test_a_retry_past_the_deadline_falls_back_to_the_gateway(task: Task, settings: Any) -> None:
    settings.A2A_RETRY_BACKOFF = 600
    services.handle_send_failure(task, A2ATransientError("slow", code="agent_timeout"))
    task.refresh_from_db()
    assert (task.state, task.transport) == (TaskState.SUBMITTED, "offline")
    assert "agent_timeout" in task.metadata["fallbacks"][0]["reason"]


def test_retry_of_a_relayed_task_resends_the_callers_first_message(skill: Any, agent: Any) -> None:
    message = {"messageId": "m1", "role": "ROLE_USER", "parts": [{"text": "review my lamp"}]}
    task = services.create_task(
        skill_id=skill.id, input=None, message=message, origin="a2a", validate_input=False
    )
    _ask(task)
    services.reply_to_task(task, message={"messageId": "m2", "parts": [{"text": "EU"}]})
    services.apply_agent_update(task, status={"state": "failed"}, via="a2a")
    services.retry_task(task)
    task.refresh_from_db()
    assert task.outbound_message["parts"] == [{"text": "review my lamp"}]
    assert task.outbound_message["messageId"] not in {"m1", "m2"}
    assert "taskId" not in task.outbound_message
