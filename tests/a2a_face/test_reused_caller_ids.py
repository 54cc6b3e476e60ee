"""An agent id is free again once its agent is deleted: whoever registers it next is a
new caller, and never meets the deleted agent's conversations at the agents it calls
(docs/a2a-face.md, "Callers' ids toward agents"). Agents registered before the caller
salt existed keep their tags, so their conversations go on across the upgrade."""

from __future__ import annotations

import asyncio
import hashlib
import hmac
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from asgiref.sync import sync_to_async
from django.conf import settings as django_settings
from django.db import connection, connections
from django.db.migrations.executor import MigrationExecutor

from a2a.api.asgi import close_pool as close_api_pool
from a2a.face.db import close_pool
from a2a.face.ids import TAG_LENGTH
from a2a.models import Task
from agent_profiles.models import AgentProfile
from platform_site.asgi import application

BEFORE = ("agent_profiles", "0009_card_source_url_text")
SALT = ("agent_profiles", "0010_agent_caller_salt")


def call(method: str, path: str, token: str | None = None, **kwargs: Any) -> httpx.Response:
    """One request through the platform's ASGI application, as a client makes it."""
    headers = {"A2A-Version": "1.0", **kwargs.pop("headers", {})}
    if token:
        headers["Authorization"] = f"Bearer {token}"

    async def run() -> httpx.Response:
        transport = httpx.ASGITransport(app=application)
        async with httpx.AsyncClient(transport=transport, base_url="http://testserver") as c:
            return await c.request(method, path, headers=headers, **kwargs)

    return asyncio.run(run())


@pytest.fixture
def world(
    transactional_db: None, make_skill: Any, make_agent: Any, settings: Any
) -> Iterator[None]:
    settings.A2A_FACE_AUTH_CACHE_SECONDS = 0  # each request reads its key's agent anew
    settings.REGISTRATION_MODE = "open"
    make_agent(skills=[make_skill()], id="worker")
    yield
    close_pool()
    close_api_pool()
    asyncio.run(sync_to_async(connections.close_all, thread_sensitive=True)())


def register(agent_id: str) -> str:
    r = call(
        "POST",
        "/api/agent-profiles/register",
        json={"agentId": agent_id, "name": agent_id, "skillIds": ["ce-review"]},
    )
    assert r.status_code == 201, r.text
    return str(r.json()["apiKey"])


def send(key: str, ctx: str) -> Task:
    body = {
        "message": {
            "messageId": "m1",
            "role": "ROLE_USER",
            "contextId": ctx,
            "parts": [{"data": {"product": "lamp"}}],
        },
        "configuration": {"returnImmediately": True},
    }
    r = call("POST", "/v1/a2a/worker/message:send", key, json=body)
    assert r.status_code == 200, r.text
    answer = r.json()
    assert (answer.get("task") or answer)["contextId"] == ctx  # the caller's own id
    return Task.objects.get(pk=(answer.get("task") or answer)["id"])


def listed(key: str, ctx: str) -> list[str]:
    r = call("GET", "/v1/a2a/worker/tasks", key, params={"contextId": ctx})
    assert r.status_code == 200, r.text
    return [t["id"] for t in r.json()["tasks"]]


def old_tag(agent_id: str) -> str:
    """An agent's tag as it was before the salt: the HMAC of its id alone."""
    identity = f"agent:{agent_id}".encode()
    digest = hmac.new(django_settings.SECRET_KEY.encode(), identity, hashlib.sha256)
    return digest.hexdigest()[:TAG_LENGTH]


def test_a_reregistered_agent_id_is_a_new_caller(world: None) -> None:
    first_key = register("caller-x")
    old = send(first_key, "session-1")
    AgentProfile.objects.filter(pk="caller-x").delete()  # the admin's "Delete selected"
    assert Task.objects.get(pk=old.pk).created_by_agent_id is None  # nobody's now

    stranger_key = register("caller-x")  # anyone may take the freed id
    new = send(stranger_key, "session-1")
    # Two different callers never meet at the agent: not the context, nor what was sent.
    assert new.context_id != old.context_id
    assert new.outbound_message["contextId"] == new.context_id
    assert new.outbound_message["contextId"] != old.outbound_message["contextId"]

    # The newcomer's own conversation is still one context, and ListTasks' contextId
    # filter finds it in its namespace (and never the deleted caller's task).
    again = send(stranger_key, "session-1")
    assert again.context_id == new.context_id
    assert sorted(listed(stranger_key, "session-1")) == sorted([str(new.pk), str(again.pk)])


def test_an_agent_registered_before_the_salt_keeps_its_conversations(world: None) -> None:
    key = register("caller-old")
    # As the migration leaves every agent registered before it (and its tasks: a
    # conversation started then, in the old namespace).
    AgentProfile.objects.filter(pk="caller-old").update(caller_salt=None)
    before = f"{old_tag('caller-old')}:session-1"

    task = send(key, "session-1")
    assert task.context_id == before  # the conversation goes on at the agent
    assert task.outbound_message["contextId"] == before
    assert listed(key, "session-1") == [str(task.pk)]


def test_a_new_agent_gets_a_salt_of_its_own(world: None) -> None:
    register("caller-a")
    register("caller-b")
    rows = AgentProfile.objects.filter(pk__startswith="caller-").values_list("caller_salt")
    salts = [salt for (salt,) in rows]
    assert len(salts) == 2
    assert None not in salts
    assert salts[0] != salts[1]


@pytest.fixture
def back_to_latest(transactional_db: None) -> Iterator[None]:
    yield
    # whatever the test left, the next tests get the current schema of every app
    MigrationExecutor(connection).migrate(MigrationExecutor(connection).loader.graph.leaf_nodes())


def test_the_migration_leaves_existing_agents_without_a_salt(back_to_latest: None) -> None:
    """A callable default on AddField is evaluated once: every existing agent would get
    the same salt (and a new tag, losing its conversations). The upgrade leaves them NULL."""
    executor = MigrationExecutor(connection)
    executor.migrate([BEFORE])
    old_model = executor.loader.project_state(BEFORE).apps.get_model(
        "agent_profiles", "AgentProfile"
    )
    old_model.objects.create(id="before-1")
    old_model.objects.create(id="before-2")

    MigrationExecutor(connection).migrate([SALT])
    rows = dict(AgentProfile.objects.values_list("id", "caller_salt"))
    assert rows == {"before-1": None, "before-2": None}
    fresh = AgentProfile.objects.create(id="after-1")
    fresh.refresh_from_db()
    assert fresh.caller_salt is not None
