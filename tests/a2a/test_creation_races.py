"""Task creation when the registry changed under it, and idempotent repeats after a person
moved the task.

Another process (the admin on another daphne) may delete an agent that this process still
holds in its registry cache (``A2A_REGISTRY_CACHE_SECONDS``). A creation in that window
picks it and its INSERT breaks the task's foreign key: that must not be taken for a
repeated idempotency key (a 500), the agent is chosen again from the database, and a
batch answers per item without half-writing. An identical repeat of a request is the same
task even after a reassignment moved it to another agent.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

import pytest
from django.db import IntegrityError, OperationalError
from django.db.models.signals import m2m_changed, post_delete, post_save
from rest_framework.test import APIClient

from a2a import batch, creation, lookups
from a2a.models import Task, TaskEvent, TaskMessage
from a2a.push_models import PushNotificationConfig
from agent_profiles.models import AgentProfile, Skill
from tests.a2a.test_api import client_for
from tests.a2a_face.conftest import FaceClient

ANY_INPUT = {"type": "object"}


@pytest.fixture
def elsewhere() -> Iterator[None]:
    """Registry changes in the test stand for another process's: this process's cache
    is not told (its receivers are off)."""
    hooks = [
        (post_save, Skill, "a2a.lookups.save.Skill"),
        (post_save, AgentProfile, "a2a.lookups.save.AgentProfile"),
        (post_delete, Skill, "a2a.lookups.delete.Skill"),
        (post_delete, AgentProfile, "a2a.lookups.delete.AgentProfile"),
        (m2m_changed, AgentProfile.skills.through, "a2a.lookups.m2m"),
    ]
    for signal, sender, uid in hooks:
        signal.disconnect(sender=sender, dispatch_uid=uid)
    try:
        yield
    finally:
        for signal, sender, uid in hooks:
            signal.connect(lookups._changed, sender=sender, dispatch_uid=uid)


def delete_agent(agent_id: str) -> None:
    """Delete the agent (and its tasks, which protect it) as the admin elsewhere does."""
    Task.objects.filter(agent_id=agent_id).delete()
    AgentProfile.objects.filter(pk=agent_id).delete()


@pytest.fixture
def api(make_user: Any) -> APIClient:
    client = client_for(make_user())
    client.raise_request_exception = False  # see the answer a caller gets
    return client


@pytest.fixture
def solo(make_skill: Any, make_agent: Any, api: APIClient, elsewhere: None) -> Skill:
    """Skill ``solo`` whose only agent ``temp-x`` was deleted elsewhere after this
    process cached it (a task for it and a task for it by name were created first)."""
    skill = make_skill(id="solo", input_schema=ANY_INPUT)
    make_agent(skills=[skill], id="temp-x")
    for body in ({}, {"agentId": "temp-x"}):
        first = api.post("/api/tasks", {"skillId": "solo", "input": {}, **body}, format="json")
        assert first.status_code == 201, first.content
    delete_agent("temp-x")
    return skill


# --- a deleted agent still in the cache ----------------------------------------------


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(
    ("named", "code"), [(None, "no_agent"), ("temp-x", "unknown_agent")], ids=["matched", "named"]
)
def test_a_creation_for_an_agent_deleted_elsewhere_gets_the_400_of_a_missing_agent(
    solo: Skill, api: APIClient, named: str | None, code: str
) -> None:
    """Not a 500 from the broken foreign key: the same 400 as once the cache has expired."""
    body = {"skillId": "solo", "input": {}, **({"agentId": named} if named else {})}
    response = api.post("/api/tasks", body, format="json")
    assert response.status_code == 400, response.content
    assert response.json()["error"]["code"] == code
    assert not Task.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_a_creation_for_an_agent_deleted_elsewhere_goes_to_another_agent(
    make_skill: Any, make_agent: Any, make_user: Any, elsewhere: None
) -> None:
    """The cache is dropped and the agent chosen again from the database: the task is
    created for an agent that still exists, once."""
    skill = make_skill(id="duo", input_schema=ANY_INPUT)
    make_agent(skills=[skill], id="agent-a")  # the matcher's first pick (ties: smaller id)
    make_agent(skills=[skill], id="agent-b")
    lookups.load(lookups.candidates(skill))  # this process caches both, idle
    delete_agent("agent-a")
    task = creation.create_task(skill_id="duo", input={}, user=make_user())
    assert task.agent_id == "agent-b"
    assert task.metadata["match"]["agentId"] == "agent-b"
    assert Task.objects.get().agent_id == "agent-b"
    assert (TaskEvent.objects.count(), TaskMessage.objects.count()) == (1, 1)


@pytest.mark.django_db(transaction=True)
def test_a_foreign_key_that_stays_broken_is_tried_twice_then_raised(
    agent: Any, user: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A broken foreign key that fresh registry data does not mend is a bug: one more
    try, with the cache dropped before it, then the error (no loop)."""
    tries: list[str] = []
    cleared: list[bool] = []

    def broken(new: list[Any]) -> None:
        tries.append(new[0].task.agent_id)
        raise IntegrityError("FOREIGN KEY constraint failed")

    monkeypatch.setattr(creation, "insert", broken)
    monkeypatch.setattr(lookups, "clear", lambda: cleared.append(True))
    with pytest.raises(IntegrityError):
        creation.create_task(skill_id="ce-review", input={"product": "x"}, user=user)
    assert tries == ["agent-one", "agent-one"]
    assert cleared == [True]


@pytest.mark.django_db(transaction=True)
def test_a_unique_key_clash_without_an_earlier_task_is_not_tried_again(
    agent: Any, user: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Only a broken foreign key means the registry changed: another integrity error
    is raised at once, as before."""
    tries: list[str] = []

    def clash(new: list[Any]) -> None:
        tries.append(new[0].task.agent_id)
        raise IntegrityError("UNIQUE constraint failed: a2a_task.something")

    monkeypatch.setattr(creation, "insert", clash)
    with pytest.raises(IntegrityError):
        creation.create_task(skill_id="ce-review", input={"product": "x"}, user=user)
    assert tries == ["agent-one"]


@pytest.mark.django_db(transaction=True)
def test_a_batch_with_an_agent_deleted_elsewhere_answers_per_item(
    solo: Skill, agent: Any, api: APIClient
) -> None:
    """The batch's INSERT fails as a whole and the items go one by one: each gets its
    own answer, and only the items reported created were written."""
    items = [
        {"skillId": "ce-review", "input": {"product": "lamp"}},
        {"skillId": "solo", "input": {}},
        {"skillId": "ce-review", "input": {"product": "chair"}},
    ]
    response = api.post("/api/tasks:batch", {"tasks": items}, format="json")
    assert response.status_code == 200, response.content
    results = response.json()["results"]
    assert [r["status"] for r in results] == [201, 400, 201]
    assert results[1]["error"]["code"] == "no_agent"
    stored = sorted(t.input["product"] for t in Task.objects.all())
    assert stored == ["chair", "lamp"]


def _created_total() -> float:
    from platform_site import metrics

    samples = [s for m in metrics.TASKS_CREATED.collect() for s in m.samples]
    return sum(s.value for s in samples if s.name.endswith("_total"))


def _logged_created(caplog: pytest.LogCaptureFixture) -> list[str]:
    """The ids of the tasks logged "task X created: ..." (the lifecycle log)."""
    lines = [r.getMessage() for r in caplog.records if r.name == "a2a.lifecycle"]
    return [line.split()[1] for line in lines if " created: skill " in line]


@pytest.mark.django_db(transaction=True)
def test_a_batch_rolled_back_counts_and_logs_only_the_tasks_committed(
    solo: Skill, agent: Any, api: APIClient, caplog: pytest.LogCaptureFixture
) -> None:
    """The batch's INSERT went in before the broken foreign key rolled it back: its
    tasks never existed, so neither the counter nor the log may say they were created."""
    caplog.set_level(logging.INFO, logger="a2a.lifecycle")
    before = _created_total()
    items = [
        {"skillId": "ce-review", "input": {"product": "lamp"}},
        {"skillId": "solo", "input": {}},
        {"skillId": "ce-review", "input": {"product": "chair"}},
    ]
    response = api.post("/api/tasks:batch", {"tasks": items}, format="json")
    assert [r["status"] for r in response.json()["results"]] == [201, 400, 201]
    stored = {str(pk) for pk in Task.objects.values_list("pk", flat=True)}
    assert len(stored) == 2
    assert sorted(_logged_created(caplog)) == sorted(stored)
    assert _created_total() - before == 2


@pytest.mark.django_db(transaction=True)
def test_a_creation_tried_again_counts_and_logs_one_task(
    make_skill: Any,
    make_agent: Any,
    make_user: Any,
    elsewhere: None,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The first try (for the agent deleted elsewhere) was rolled back: one task made,
    one counted and logged (a transaction on SQLite; one statement on PostgreSQL)."""
    caplog.set_level(logging.INFO, logger="a2a.lifecycle")
    skill = make_skill(id="duo", input_schema=ANY_INPUT)
    make_agent(skills=[skill], id="agent-a")
    make_agent(skills=[skill], id="agent-b")
    lookups.load(lookups.candidates(skill))
    delete_agent("agent-a")
    before = _created_total()
    task = creation.create_task(skill_id="duo", input={}, user=make_user())
    assert task.agent_id == "agent-b"
    assert _logged_created(caplog) == [str(task.pk)]
    assert _created_total() - before == 1


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(
    ("error", "status", "code"),
    [(RuntimeError("boom"), 500, "internal_error"), (OperationalError("gone"), 503, "unavailable")],
    ids=["bug", "outage"],
)
def test_an_item_failing_in_the_one_by_one_fallback_fails_alone(
    solo: Skill,
    agent: Any,
    api: APIClient,
    monkeypatch: pytest.MonkeyPatch,
    error: Exception,
    status: int,
    code: str,
) -> None:
    """Once earlier items are committed the batch must not answer a 500 for all of them
    (a client retrying would duplicate them): the failing item gets its own error."""
    real = batch.create_task

    def failing_for_chair(**fields: Any) -> Task:
        if fields["input"].get("product") == "chair":
            raise error
        return real(**fields)

    monkeypatch.setattr(batch, "create_task", failing_for_chair)
    items = [
        {"skillId": "ce-review", "input": {"product": "lamp"}},
        {"skillId": "solo", "input": {}},
        {"skillId": "ce-review", "input": {"product": "chair"}},
    ]
    response = api.post("/api/tasks:batch", {"tasks": items}, format="json")
    assert response.status_code == 200, response.content
    results = response.json()["results"]
    assert [r["status"] for r in results] == [201, 400, status]
    assert results[2]["error"]["code"] == code
    assert [t.input["product"] for t in Task.objects.all()] == ["lamp"]


# --- idempotent repeats after a reassignment ------------------------------------------


REQUEST = {
    "skillId": "ce-review",
    "input": {"product": "lamp"},
    "agentId": "agent-one",
    "idempotencyKey": "order-42",
}


@pytest.fixture
def reassigned(user: Any, skill: Any, agent: Any, make_agent: Any) -> tuple[APIClient, str]:
    """A task created for agent-one with key order-42, failed, then reassigned to
    agent-two by a person; the client and the task's id."""
    make_agent(skills=[skill], id="agent-two", a2a_endpoint="http://127.0.0.1:9/two")
    api = client_for(user)
    first = api.post("/api/tasks", REQUEST, format="json")
    assert first.status_code == 201, first.content
    task_id = first.json()["id"]
    Task.objects.get(pk=task_id).fail("agent_failed", "Agent 'agent-one': broke")
    moved = api.post(f"/api/tasks/{task_id}/reassign", {"agentId": "agent-two"}, format="json")
    assert moved.status_code == 200, moved.content
    return api, task_id


@pytest.mark.django_db
def test_an_identical_repeat_after_a_reassignment_is_the_first_task(
    reassigned: tuple[APIClient, str],
) -> None:
    """The client retries its original request (its answer was lost): the key was used
    for exactly this request, so it gets the task, wherever it is now."""
    api, task_id = reassigned
    again = api.post("/api/tasks", REQUEST, format="json")
    assert again.status_code == 200, again.content
    assert again.json()["id"] == task_id
    assert again.json()["agentId"] == "agent-two"
    assert Task.objects.count() == 1


@pytest.mark.django_db
def test_an_identical_repeat_in_a_batch_after_a_reassignment_is_the_first_task(
    reassigned: tuple[APIClient, str],
) -> None:
    """The batch's per-item repeat status, as for the single request."""
    api, task_id = reassigned
    response = api.post("/api/tasks:batch", {"tasks": [REQUEST]}, format="json")
    result = response.json()["results"][0]
    assert result["status"] == 200, result
    assert result["task"]["id"] == task_id
    assert Task.objects.count() == 1


@pytest.mark.django_db
def test_a_repeat_naming_the_agent_it_was_moved_to_is_another_request(
    reassigned: tuple[APIClient, str],
) -> None:
    """The key was used for agent-one: naming agent-two is a different request (409),
    and the answer says where the key's task was sent and where it is now."""
    api, task_id = reassigned
    response = api.post("/api/tasks", {**REQUEST, "agentId": "agent-two"}, format="json")
    assert response.status_code == 409, response.content
    error = response.json()["error"]
    assert error["code"] == "idempotency_conflict"
    assert "'agent-one' (reassigned since to 'agent-two')" in error["message"]
    assert error["details"] == {"taskId": task_id}


# --- the A2A face's send with a push config -------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_a_face_send_with_a_push_config_for_an_agent_deleted_elsewhere_goes_to_another(
    make_skill: Any, make_agent: Any, make_user: Any, elsewhere: None
) -> None:
    """A send carrying a push config creates the task and the config in one transaction,
    whose foreign keys are checked only at its commit, after create_task's own second
    choice: it answered 500. The face chooses again, once, and nothing is half-written."""
    skill = make_skill(id="duo", input_schema=ANY_INPUT)
    make_agent(skills=[skill], id="agent-a")
    make_agent(skills=[skill], id="agent-b")
    lookups.load(lookups.candidates(skill))
    delete_agent("agent-a")
    caller = FaceClient(make_user().raw_token, check=False)
    caller.client.raise_request_exception = False
    body = {
        "message": {
            "messageId": "m-1",
            "role": "ROLE_USER",
            "parts": [{"data": {}}],
            "metadata": {"skillId": "duo"},
        },
        "configuration": {
            "returnImmediately": True,
            "taskPushNotificationConfig": {"url": "https://hooks.example/a2a"},
        },
    }
    response = caller.post("/v1/a2a/message:send", body)
    assert response.status_code == 200, response.content
    assert Task.objects.get().agent_id == "agent-b"
    assert PushNotificationConfig.objects.get().task_id == Task.objects.get().pk
