"""Task creation is cheap: few queries, cached skills and candidates that a change in the
registry clears at once, no re-reads by signal receivers, and socket-only agents' tasks
handed to the gateway in the creation transaction."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from a2a import batch, creation
from a2a.exceptions import InputInvalid, UnknownAgent, UnknownSkill
from a2a.models import Task
from a2a.states import NextAction, TaskState, Transport
from agent_profiles.exceptions import NoAgentAvailable
from agent_profiles.models import AgentStatus
from gateway.models import Delivery, DeliveryKind, DeliveryStatus, Presence

pytestmark = pytest.mark.django_db


def create(user: Any, **fields: Any) -> Task:
    fields.setdefault("skill_id", "ce-review")
    fields.setdefault("input", {"product": "lamp"})
    return creation.create_task(user=user, **fields)


def registry_queries(queries: CaptureQueriesContext) -> list[str]:
    return [q["sql"] for q in queries.captured_queries if "agent_profiles_" in q["sql"]]


def test_creation_takes_few_queries(
    user: Any, agent: Any, django_assert_max_num_queries: Any
) -> None:
    create(user)  # the first creation fills the caches
    # active-task count, (BEGIN), task, event, message, (COMMIT)
    with django_assert_max_num_queries(6):
        create(user)
    # ... and the idempotency key's lookup
    with django_assert_max_num_queries(7):
        create(user, idempotency_key="k")
    # to a named agent: no matching at all
    with django_assert_max_num_queries(5):
        create(user, agent_id=agent.id)


def test_creation_reads_no_registry_rows_while_cached(user: Any, agent: Any) -> None:
    create(user)
    with CaptureQueriesContext(connection) as queries:
        create(user)
        create(user, agent_id=agent.id)
    assert registry_queries(queries) == []


def test_the_cache_can_be_turned_off(user: Any, agent: Any, settings: Any) -> None:
    settings.A2A_REGISTRY_CACHE_SECONDS = 0
    create(user)
    with CaptureQueriesContext(connection) as queries:
        create(user)
    assert registry_queries(queries)


def test_a_disabled_agent_is_not_picked_at_once(user: Any, agent: Any) -> None:
    create(user)
    agent.status = AgentStatus.DISABLED
    agent.save()
    with pytest.raises(NoAgentAvailable):
        create(user)
    with pytest.raises(UnknownAgent, match="disabled"):
        create(user, agent_id=agent.id)


def test_a_new_agent_or_skill_offer_counts_at_once(
    user: Any, skill: Any, make_skill: Any, make_agent: Any
) -> None:
    with pytest.raises(NoAgentAvailable):
        create(user)
    newcomer = make_agent(id="newcomer", skills=[])
    newcomer.skills.add(skill)  # the offer changes after the agent was saved
    assert create(user).agent_id == "newcomer"
    newcomer.skills.remove(skill)
    with pytest.raises(UnknownAgent, match="does not offer"):
        create(user, agent_id="newcomer")


def test_the_cache_never_refuses_what_another_process_just_registered(
    user: Any, skill: Any, make_skill: Any, make_agent: Any
) -> None:
    """A change that sends no signal here (another daphne, a bulk update) is looked up
    again before a refusal, so a freshly registered agent or skill works at once."""
    with pytest.raises(NoAgentAvailable):
        create(user)  # caches "no candidates" for ce-review
    newcomer = make_agent(id="newcomer", skills=[])
    newcomer.skills.through.objects.bulk_create(  # no m2m_changed signal
        [newcomer.skills.through(agentprofile_id="newcomer", skill_id=skill.pk)]
    )
    assert create(user).agent_id == "newcomer"
    assert create(user, agent_id="newcomer").agent_id == "newcomer"
    with pytest.raises(UnknownSkill):
        create(user, skill_id="fresh-skill")  # caches "unknown"
    type(skill).objects.bulk_create([type(skill)(id="fresh-skill", name="Fresh")])
    with pytest.raises(NoAgentAvailable):  # the skill is found; it has no agent yet
        create(user, skill_id="fresh-skill")


def test_a_deactivated_or_deleted_skill_is_refused_at_once(
    user: Any, skill: Any, agent: Any
) -> None:
    create(user)
    skill.is_active = False
    skill.save()
    with pytest.raises(UnknownSkill, match="inactive"):
        create(user)
    Task.objects.all().delete()
    agent.skills.clear()
    skill.delete()
    with pytest.raises(UnknownSkill, match="unknown"):
        create(user)


def test_a_schema_change_applies_to_the_next_creation(user: Any, skill: Any, agent: Any) -> None:
    create(user)
    skill.input_schema = {"type": "object", "required": ["market"]}
    skill.save()
    with pytest.raises(InputInvalid, match="market"):
        create(user)


def test_transitions_tell_receivers_the_new_state(
    task: Task, django_capture_on_commit_callbacks: Any
) -> None:
    from a2a.signals import task_changed

    seen: list[dict[str, Any]] = []

    def listen(sender: Any, **kwargs: Any) -> None:
        seen.append(kwargs)

    task_changed.connect(listen)
    try:
        with django_capture_on_commit_callbacks(execute=True):
            task.start_work()
    finally:
        task_changed.disconnect(listen)
    assert seen[0]["task_id"] == task.pk
    assert seen[0]["state"] == TaskState.WORKING


def test_the_gateway_withdraws_a_finished_tasks_deliveries_without_reading_the_task(
    user: Any, make_agent: Any, skill: Any
) -> None:
    from gateway.receivers import withdraw_deliveries_of_finished_task

    make_agent(id="socket-only", skills=[skill], a2a_endpoint="")
    task = create(user)
    Task.objects.filter(pk=task.pk).update(state=TaskState.CANCELED)
    with CaptureQueriesContext(connection) as queries:
        withdraw_deliveries_of_finished_task(Task, task_id=task.pk, state=TaskState.CANCELED)
    assert [q["sql"].split()[0] for q in queries.captured_queries] == ["UPDATE"]
    assert Delivery.objects.get(task=task).status == DeliveryStatus.CANCELED


# --- socket-only agents: assigned in the creation transaction ---------------------------


def test_a_socket_only_agents_task_is_assigned_at_creation(
    user: Any, make_agent: Any, skill: Any, django_capture_on_commit_callbacks: Any
) -> None:
    make_agent(id="socket-only", skills=[skill], a2a_endpoint="")
    with django_capture_on_commit_callbacks() as callbacks:
        task = create(user)
    task.refresh_from_db()
    assert task.transport == Transport.OFFLINE
    assert task.next_action == NextAction.NONE
    assert task.state == TaskState.SUBMITTED
    assert task.metadata["fallbacks"] == []
    delivery = Delivery.objects.get(task=task)
    assert (delivery.kind, delivery.status) == (DeliveryKind.ASSIGN, DeliveryStatus.PENDING)
    assert delivery.payload["type"] == "task.assign"
    assert delivery.payload["task"]["id"] == str(task.id)
    assert delivery.expires_at is not None
    # No worker round trip: the only after-commit work is the hint to the agent's sockets
    # (besides counting and logging the task created, once committed).
    others = [c for c in callbacks if not c.__qualname__.startswith("insert.")]
    assert len(others) == 1
    assert len(callbacks) == 2


def test_a_socket_only_agent_online_gets_a_websocket_task(
    user: Any, make_agent: Any, skill: Any
) -> None:
    agent = make_agent(id="socket-only", skills=[skill], a2a_endpoint="")
    Presence.objects.create(agent=agent, channel_name="chan-1", server_id="test")
    task = create(user)
    assert task.transport == Transport.WEBSOCKET
    task.refresh_from_db()
    assert task.transport == Transport.WEBSOCKET
    assert Delivery.objects.filter(task=task, status=DeliveryStatus.PENDING).count() == 1


def test_a_batch_assigns_socket_only_tasks_in_few_queries(
    user: Any, make_agent: Any, skill: Any
) -> None:
    make_agent(id="socket-only", skills=[skill], a2a_endpoint="")
    requests = [batch.TaskRequest("ce-review", {"product": f"p{i}"}) for i in range(10)]
    batch.create_tasks(requests[:1], user=user)
    with CaptureQueriesContext(connection) as queries:
        outcomes = batch.create_tasks(requests[1:], user=user)
    assert all(o.created for o in outcomes)
    assert Delivery.objects.count() == 10
    assert len(queries) <= 9


def test_an_agent_with_an_endpoint_is_sent_over_http(user: Any, agent: Any) -> None:
    task = create(user)
    assert task.transport == Transport.A2A
    assert task.next_action == NextAction.SEND
    assert not Delivery.objects.exists()
