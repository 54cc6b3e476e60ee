"""Dispatcher business rules without a network: creation and the status mapping
(people's actions and the send-failure policy: test_task_actions.py)."""

from __future__ import annotations

from typing import Any

import pytest

from a2a import agent_updates, creation, services
from a2a.exceptions import (
    A2AProtocolError,
    InputInvalid,
    UnknownAgent,
    UnknownSkill,
)
from a2a.models import Direction, Task, TaskEvent, TaskMessage
from a2a.states import NextAction, TaskState
from agent_profiles.exceptions import NoAgentAvailable
from platform_site.errors import Conflict
from tests.a2a.helpers import working

pytestmark = pytest.mark.django_db


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
        creation.create_task(skill_id="nope", input={}, user=user)
    assert not Task.objects.exists()


def test_it_refuses_an_inactive_skill(skill: Any, agent: Any, user: Any) -> None:
    skill.is_active = False
    skill.save()
    with pytest.raises(UnknownSkill):
        creation.create_task(skill_id=skill.id, input={"product": "x"}, user=user)


def test_it_refuses_input_that_fails_the_schema(skill: Any, agent: Any, user: Any) -> None:
    with pytest.raises(InputInvalid) as info:
        creation.create_task(skill_id=skill.id, input={"market": 3}, user=user)
    paths = {e["path"] for e in info.value.details["errors"]}
    assert paths == {"(root)", "market"}
    assert not Task.objects.exists()


def test_it_skips_input_validation_when_asked(skill: Any, agent: Any, user: Any) -> None:
    task = creation.create_task(skill_id=skill.id, input={}, user=user, validate_input=False)
    assert task.state == TaskState.SUBMITTED


def test_it_refuses_an_unknown_or_unfit_agent(
    skill: Any, agent: Any, user: Any, make_agent: Any, make_skill: Any
) -> None:
    with pytest.raises(UnknownAgent):
        creation.create_task(skill_id=skill.id, input={"product": "x"}, agent_id="ghost", user=user)
    make_agent(id="other", skills=[make_skill(id="other-skill")])
    with pytest.raises(UnknownAgent, match="does not offer"):
        creation.create_task(skill_id=skill.id, input={"product": "x"}, agent_id="other", user=user)
    agent.status = "disabled"
    agent.save()
    with pytest.raises(UnknownAgent, match="disabled"):
        creation.create_task(
            skill_id=skill.id, input={"product": "x"}, agent_id=agent.id, user=user
        )
    assert not Task.objects.exists()


def test_it_says_so_when_no_agent_offers_the_skill(skill: Any, user: Any) -> None:
    with pytest.raises(NoAgentAvailable, match="No active agent offers"):
        creation.create_task(skill_id=skill.id, input={"product": "x"}, user=user)


def test_an_idempotency_key_returns_the_first_task(skill: Any, agent: Any, user: Any) -> None:
    first = creation.create_task(
        skill_id=skill.id, input={"product": "x"}, user=user, idempotency_key="k1"
    )
    again = creation.create_task(
        skill_id=skill.id, input={"product": "x"}, user=user, idempotency_key="k1"
    )
    assert (first.created, again.created) == (True, False)
    assert again.pk == first.pk
    assert Task.objects.count() == 1


def test_an_idempotency_key_reused_for_another_request_conflicts(
    skill: Any, agent: Any, user: Any
) -> None:
    creation.create_task(skill_id=skill.id, input={"product": "x"}, user=user, idempotency_key="k")
    with pytest.raises(Conflict):
        creation.create_task(
            skill_id=skill.id, input={"product": "y"}, user=user, idempotency_key="k"
        )


def test_idempotency_keys_are_per_user(skill: Any, agent: Any, make_user: Any) -> None:
    alice, bob = make_user("alice"), make_user("bob")
    a = creation.create_task(
        skill_id=skill.id, input={"product": "x"}, user=alice, idempotency_key="k"
    )
    b = creation.create_task(
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
    task = creation.create_task(
        skill_id=skill.id, input=None, message=message, origin="a2a", validate_input=False
    )
    assert task.outbound_message == message
    assert task.context_id == "ctx-9"


# --- the status mapping ---------------------------------------------------------------


def test_working_keeps_following_and_records_remote_ids(task: Task) -> None:
    working(task)
    task.refresh_from_db()
    assert task.state == TaskState.WORKING
    assert (task.remote_task_id, task.remote_context_id) == ("r-1", "c-1")


def test_completed_with_valid_output_completes(task: Task) -> None:
    artifacts = [{"artifactId": "a", "parts": [{"data": {"verdict": "pass"}}], "extra": 1}]
    agent_updates.apply_agent_update(
        task, status={"state": "TASK_STATE_COMPLETED"}, artifacts=artifacts, via="a2a"
    )
    task.refresh_from_db()
    assert task.state == TaskState.COMPLETED
    assert task.output == {"verdict": "pass"}
    assert task.artifacts == artifacts


def test_completed_with_invalid_output_fails_keeping_the_errors(task: Task) -> None:
    artifacts = [{"artifactId": "a", "parts": [{"data": {"verdict": "maybe"}}]}]
    agent_updates.apply_agent_update(
        task, status={"state": "TASK_STATE_COMPLETED"}, artifacts=artifacts, via="a2a"
    )
    task.refresh_from_db()
    assert task.state == TaskState.FAILED
    assert task.error["code"] == "output_invalid"
    assert task.error["details"]["errors"][0]["path"] == "verdict"
    assert task.output is None
    assert task.artifacts == artifacts


def test_a_task_read_alone_is_judged_against_the_cached_skill(task: Task) -> None:
    """A push reads the task without its skill: the output schema comes from the registry
    cache (no query for the skill), and from the database when the cache knows no skill."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from a2a import lookups

    lookups.skill(task.skill_id)  # cached, as creation leaves it
    alone = Task.objects.get(pk=task.pk)
    artifacts = [{"artifactId": "a", "parts": [{"data": {"verdict": "maybe"}}]}]
    with CaptureQueriesContext(connection) as queries:
        agent_updates.apply_agent_update(
            alone, status={"state": "TASK_STATE_COMPLETED"}, artifacts=artifacts, via="push"
        )
    assert not [q for q in queries.captured_queries if "agent_profiles_skill" in q["sql"]]
    alone.refresh_from_db()
    assert (alone.state, alone.error["code"]) == (TaskState.FAILED, "output_invalid")

    other = creation.create_task(skill_id=task.skill_id, input={"product": "x"}, user=None)
    # A stale "no such skill":
    lookups._put(lookups._skills, task.skill_id, None, lookups._generation)
    other = Task.objects.get(pk=other.pk)
    agent_updates.apply_agent_update(
        other, status={"state": "TASK_STATE_COMPLETED"}, artifacts=artifacts, via="push"
    )
    other.refresh_from_db()
    assert (other.state, other.error["code"]) == (TaskState.FAILED, "output_invalid")


def test_completed_without_data_fails_as_invalid_output(task: Task) -> None:
    agent_updates.apply_agent_update(task, status={"state": "completed"}, artifacts=[], via="a2a")
    task.refresh_from_db()
    assert (task.state, task.error["code"]) == (TaskState.FAILED, "output_invalid")


def test_it_reads_legacy_states_kinds_and_json_text_parts(task: Task) -> None:
    artifacts = [{"kind": "artifact", "parts": [{"kind": "text", "text": '{"verdict": "fail"}'}]}]
    agent_updates.apply_agent_update(
        task, status={"state": "completed"}, artifacts=artifacts, via="x"
    )
    task.refresh_from_db()
    assert (task.state, task.output) == (TaskState.COMPLETED, {"verdict": "fail"})


def test_several_data_artifacts_are_merged(task: Task) -> None:
    artifacts = [
        {"parts": [{"data": {"verdict": "fail"}}]},
        {"parts": [{"data": {"verdict": "pass", "notes": "ok"}}]},
    ]
    agent_updates.apply_agent_update(
        task, status={"state": "completed"}, artifacts=artifacts, via="x"
    )
    task.refresh_from_db()
    assert task.output == {"verdict": "pass", "notes": "ok"}


def test_input_required_stores_the_question_and_pauses(task: Task) -> None:
    question = {"messageId": "q1", "role": "ROLE_AGENT", "parts": [{"text": "EU or UK?"}]}
    working(task)
    agent_updates.apply_agent_update(
        task, status={"state": "TASK_STATE_INPUT_REQUIRED", "message": question}, via="a2a"
    )
    task.refresh_from_db()
    assert task.state == TaskState.INPUT_REQUIRED
    assert task.question == question
    assert task.next_action == NextAction.NONE
    # the same status polled again is not stored twice
    agent_updates.apply_agent_update(
        task, status={"state": "TASK_STATE_INPUT_REQUIRED", "message": question}, via="a2a"
    )
    assert TaskMessage.objects.filter(task=task, direction=Direction.FROM_AGENT).count() == 1


def test_auth_required_is_an_interruption_too(task: Task) -> None:
    agent_updates.apply_agent_update(task, status={"state": "auth-required"}, via="a2a")
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
    agent_updates.apply_agent_update(task, status={"state": state, "message": message}, via="a2a")
    task.refresh_from_db()
    assert task.state == expected
    assert (task.error or {}).get("code") == code
    if code:
        assert "because" in task.error["message"]


def test_an_unknown_state_is_a_protocol_error(task: Task) -> None:
    with pytest.raises(A2AProtocolError):
        agent_updates.apply_agent_update(task, status={"state": "exploded"}, via="a2a")
    task.refresh_from_db()
    assert task.state == TaskState.SUBMITTED


def test_news_after_the_end_changes_nothing(task: Task) -> None:
    services.cancel_task(task)
    agent_updates.apply_agent_update(
        task,
        status={"state": "completed"},
        artifacts=[{"parts": [{"data": {"verdict": "pass"}}]}],
        via="a2a",
    )
    task.refresh_from_db()
    assert task.state == TaskState.CANCELED
    assert task.output is None
