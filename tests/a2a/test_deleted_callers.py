"""A caller (a user, an agent) deleted while a token cache still held it: its next
task's INSERT broke its creator's foreign key, a 500 where the 401 its token now gets was
due (the A2A face's send, with and without a push config, and the tasks API)."""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from rest_framework.test import APIClient

from a2a import creation
from a2a.face.context import principal_cache
from a2a.models import Task
from a2a.push_models import PushNotificationConfig
from tests.a2a.test_creation_races import ANY_INPUT
from tests.a2a_face.conftest import FaceClient

# --- a caller deleted while a token cache held it -------------------------------------


@pytest.fixture
def token_cache(settings: Any) -> Iterator[None]:
    """The face's token cache on, as by default (the face's tests turn it off)."""
    settings.A2A_FACE_AUTH_CACHE_SECONDS = 5.0
    principal_cache.clear()
    yield
    principal_cache.clear()


def face_send(token: str, *, push: bool = False) -> Any:
    caller = FaceClient(token, check=False)
    caller.client.raise_request_exception = False  # see the answer a caller gets
    config: dict[str, Any] = {"returnImmediately": True}
    if push:
        config["taskPushNotificationConfig"] = {"url": "https://hooks.example/a2a"}
    message = {"role": "ROLE_USER", "parts": [{"data": {}}], "metadata": {"skillId": "duo"}}
    message["messageId"] = str(uuid.uuid4())
    return caller.post("/v1/a2a/message:send", {"message": message, "configuration": config})


@pytest.fixture
def callers(make_skill: Any, make_agent: Any, make_user: Any) -> dict[str, Any]:
    """A user and an agent that call the face, each once (their tokens now cached)."""
    skill = make_skill(id="duo", input_schema=ANY_INPUT)
    make_agent(skills=[skill], id="agent-a")
    found = {"user": make_user("carol"), "agent": make_agent(id="caller-agent")}
    for who in found.values():
        token = getattr(who, "raw_token", None) or who.raw_key
        assert face_send(token).status_code == 200
    return found


def _token(who: Any) -> str:
    return getattr(who, "raw_token", None) or who.raw_key


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("kind", ["user", "agent"])
def test_a_caller_deleted_in_this_process_is_refused_at_once(
    token_cache: None, callers: dict[str, Any], kind: str
) -> None:
    """Deleting a user or an agent (the admin's Delete selected) drops the token cache:
    its cached token made a task whose INSERT broke its creator's foreign key (a 500)."""
    callers[kind].delete()
    response = face_send(_token(callers[kind]))
    assert response.status_code == 401, response.content
    assert Task.objects.count() == 2  # the first sends' only


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("push", [False, True], ids=["plain", "push-config"])
@pytest.mark.parametrize("kind", ["user", "agent"])
def test_a_caller_deleted_elsewhere_while_its_token_is_cached_gets_a_401(
    token_cache: None, callers: dict[str, Any], kind: str, push: bool
) -> None:
    """Another process deleted it: this one's token cache still holds the caller for
    A2A_FACE_AUTH_CACHE_SECONDS. The broken foreign key is answered as the token now is
    (401 UNAUTHENTICATED), not 500, on both of the send's paths, and the token's entry
    is dropped. With a push config the key is checked only at the commit."""
    token = _token(callers[kind])
    key = hashlib.sha256(token.encode()).digest()
    held = principal_cache._entries[key]
    callers[kind].delete()
    principal_cache._entries[key] = held  # this process was not told
    response = face_send(token, push=push)
    assert response.status_code == 401, response.content
    assert response.json()["error"]["status"] == "UNAUTHENTICATED"
    assert principal_cache.cached(token) is None
    assert Task.objects.count() == 2
    assert not PushNotificationConfig.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_a_tasks_api_creation_by_a_user_deleted_meanwhile_gets_a_401(
    make_skill: Any, make_agent: Any, make_user: Any
) -> None:
    """POST /api/tasks authenticates every request, but the user may be deleted between
    that and the INSERT: 401 authentication_failed, not a 500."""
    make_agent(skills=[make_skill(id="duo", input_schema=ANY_INPUT)], id="agent-a")
    user = make_user("dave")
    gone = get_user_model().objects.get(pk=user.pk)
    user.delete()
    client = APIClient()
    client.raise_request_exception = False
    client.force_authenticate(user=gone)  # as the request's authentication found it
    response = client.post("/api/tasks", {"skillId": "duo", "input": {}}, format="json")
    assert response.status_code == 401, response.content
    assert response.json()["error"]["code"] == "authentication_failed"
    assert not Task.objects.exists()
    with pytest.raises(creation.CallerGone):
        creation.create_task(skill_id="duo", input={}, user=gone)
