"""GetTask, ListTasks and CancelTask on the HTTP+JSON binding."""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from a2a.models import Task, TaskMessage
from a2a.states import TaskState
from tests.a2a_face.conftest import FaceClient, error_reason

pytestmark = pytest.mark.django_db
Z_TIME = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")


def _walk_keys(value: Any) -> set[str]:
    if isinstance(value, dict):
        return set(value) | {k for v in value.values() for k in _walk_keys(v)}
    if isinstance(value, list):
        return {k for v in value for k in _walk_keys(v)}
    return set()


def test_get_returns_the_bare_task_in_a2a_shape(
    as_alice: FaceClient, alice: Any, make_task: Callable[..., Task]
) -> None:
    task = make_task(alice)
    task.start_work()
    response = as_alice.get(f"/v1/a2a/tasks/{task.id}")
    assert response.status_code == 200
    body = response.json()
    assert body["id"] == str(task.id)
    assert body["contextId"] == task.context_id
    assert body["status"]["state"] == "TASK_STATE_WORKING"
    assert Z_TIME.match(body["status"]["timestamp"])
    assert body["history"][0]["messageId"] == "m-1"
    # Our ids, not the agent's, and no 0.3 leftovers.
    assert body["history"][0]["taskId"] == str(task.id)
    assert body["history"][0]["contextId"] == task.context_id
    assert not {"kind", "final", "context_id", "task_id"} & _walk_keys(body)


def test_get_with_history_length_zero_omits_history(
    as_alice: FaceClient, alice: Any, make_task: Callable[..., Task]
) -> None:
    task = make_task(alice)
    body = as_alice.get(f"/v1/a2a/tasks/{task.id}", {"historyLength": "0"}).json()
    assert "history" not in body


def test_get_with_history_length_keeps_the_latest_messages(
    as_alice: FaceClient, alice: Any, make_task: Callable[..., Task]
) -> None:
    task = make_task(alice)
    TaskMessage.objects.create(
        task=task,
        direction="from_agent",
        message_id="a-1",
        message={"messageId": "a-1", "parts": [{"text": "which market?"}]},
    )
    body = as_alice.get(f"/v1/a2a/tasks/{task.id}", {"historyLength": 1}).json()
    assert [m["messageId"] for m in body["history"]] == ["a-1"]
    assert body["history"][0]["role"] == "ROLE_AGENT"


def test_get_refuses_a_negative_history_length(
    as_alice: FaceClient, alice: Any, make_task: Callable[..., Task]
) -> None:
    task = make_task(alice)
    response = as_alice.get(f"/v1/a2a/tasks/{task.id}", {"historyLength": "-1"})
    assert error_reason(response) == "INVALID_PARAMS"


def test_get_shows_the_question_while_input_is_required(
    as_alice: FaceClient, alice: Any, make_task: Callable[..., Task]
) -> None:
    task = make_task(alice)
    task.require_input({"messageId": "q", "role": "ROLE_AGENT", "parts": [{"text": "Which?"}]})
    body = as_alice.get(f"/v1/a2a/tasks/{task.id}").json()
    assert body["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
    assert body["status"]["message"]["parts"] == [{"text": "Which?"}]
    assert body["status"]["message"]["taskId"] == str(task.id)


def test_get_shows_artifacts_of_a_completed_task(
    as_alice: FaceClient, alice: Any, make_task: Callable[..., Task]
) -> None:
    task = make_task(alice)
    artifacts = [{"artifactId": "a", "parts": [{"data": {"verdict": "pass"}}], "kind": "x"}]
    task.complete({"verdict": "pass"}, artifacts)
    body = as_alice.get(f"/v1/a2a/tasks/{task.id}").json()
    assert body["status"]["state"] == "TASK_STATE_COMPLETED"
    assert body["artifacts"] == [{"artifactId": "a", "parts": [{"data": {"verdict": "pass"}}]}]


def test_get_explains_a_failed_task_in_its_status_message(
    as_alice: FaceClient, alice: Any, make_task: Callable[..., Task]
) -> None:
    task = make_task(alice)
    task.fail("output_invalid", "The agent's output does not fit the schema.")
    body = as_alice.get(f"/v1/a2a/tasks/{task.id}").json()
    assert body["status"]["state"] == "TASK_STATE_FAILED"
    assert "schema" in body["status"]["message"]["parts"][0]["text"]


@pytest.mark.parametrize("task_id", ["00000000-0000-0000-0000-000000000000", "not-a-uuid"])
def test_get_of_an_unknown_task_is_task_not_found(as_alice: FaceClient, task_id: str) -> None:
    response = as_alice.get(f"/v1/a2a/tasks/{task_id}")
    assert response.status_code == 404
    assert error_reason(response) == "TASK_NOT_FOUND"


def test_a_caller_cannot_see_another_callers_task(
    as_bob: FaceClient, alice: Any, make_task: Callable[..., Task]
) -> None:
    task = make_task(alice)
    assert as_bob.get(f"/v1/a2a/tasks/{task.id}").status_code == 404
    assert as_bob.post(f"/v1/a2a/tasks/{task.id}:cancel").status_code == 404
    assert as_bob.get("/v1/a2a/tasks").json()["totalSize"] == 0


def test_an_agent_caller_sees_only_the_tasks_it_asked_for(
    make_agent: Callable[..., Any], alice: Any, make_task: Callable[..., Task]
) -> None:
    caller = make_agent(id="caller-agent")
    mine = make_task(agent_caller=caller)
    alices = make_task(alice)
    client = FaceClient(caller.raw_key)
    listing = client.get("/v1/a2a/tasks").json()
    assert [t["id"] for t in listing["tasks"]] == [str(mine.id)]
    assert client.get(f"/v1/a2a/tasks/{mine.id}").status_code == 200
    assert client.get(f"/v1/a2a/tasks/{alices.id}").status_code == 404


def test_an_anonymous_caller_sees_only_anonymous_callers_tasks(
    settings: Any, alice: Any, make_task: Callable[..., Task]
) -> None:
    settings.A2A_ALLOW_ANONYMOUS = True
    nobodys = make_task()
    alices = make_task(alice)
    anonymous = FaceClient(None)
    answer = anonymous.get(f"/v1/a2a/tasks/{nobodys.id}")
    assert answer.status_code == 200
    assert [m["messageId"] for m in answer.json()["history"]] == [
        m.message_id for m in nobodys.messages.all()
    ]
    assert anonymous.get(f"/v1/a2a/tasks/{alices.id}").status_code == 404


def test_the_tasks_of_a_deleted_user_or_agent_pass_to_no_anonymous_caller(
    settings: Any,
    make_user: Callable[..., Any],
    make_agent: Callable[..., Any],
    skill: Any,
    make_task: Callable[..., Task],
) -> None:
    """Deleting a caller leaves its tasks without a creator (kept, as records), which is
    not what makes a task anonymous callers': they would read its webhook's token,
    cancel it, answer it."""
    settings.A2A_ALLOW_ANONYMOUS = True
    carol, caller = make_user("carol"), make_agent(id="caller-agent", skills=[skill])
    tasks = [make_task(carol), make_task(agent_caller=caller)]
    carol.delete()
    caller.delete()
    anonymous = FaceClient(None, check=False)
    for task in tasks:
        task.refresh_from_db()
        assert (task.created_by_id, task.created_by_agent_id) == (None, None)
        assert anonymous.get(f"/v1/a2a/tasks/{task.id}").status_code == 404
        assert anonymous.post(f"/v1/a2a/tasks/{task.id}:cancel").status_code == 404
        configs = anonymous.get(f"/v1/a2a/tasks/{task.id}/pushNotificationConfigs")
        assert configs.status_code == 404
    listing = anonymous.get("/v1/a2a/tasks", {"contextId": tasks[0].context_id})
    assert listing.json()["tasks"] == []


def test_tenant_routes_only_show_that_agents_tasks(
    as_alice: FaceClient,
    alice: Any,
    make_agent: Callable[..., Any],
    skill: Any,
    make_task: Callable[..., Task],
) -> None:
    other = make_agent(id="agent-two", skills=[skill])
    mine = make_task(alice)
    theirs = make_task(alice, agent=other)
    listing = as_alice.get("/v1/a2a/agent-two/tasks").json()
    assert [t["id"] for t in listing["tasks"]] == [str(theirs.id)]
    assert as_alice.get(f"/v1/a2a/agent-two/tasks/{mine.id}").status_code == 404
    assert as_alice.get(f"/v1/a2a/agent-one/tasks/{mine.id}").status_code == 200


def test_list_pages_newest_first_with_a_cursor(
    as_alice: FaceClient, alice: Any, make_task: Callable[..., Task]
) -> None:
    base = timezone.now()
    tasks = [make_task(alice, state_changed_at=base - timedelta(minutes=i)) for i in range(5)]
    seen: list[str] = []
    token = ""
    for _ in range(5):
        params: dict[str, Any] = {"pageSize": 2}
        if token:
            params["pageToken"] = token
        page = as_alice.get("/v1/a2a/tasks", params).json()
        assert page["totalSize"] == 5
        assert page["pageSize"] == 2
        seen += [t["id"] for t in page["tasks"]]
        token = page["nextPageToken"]
        if not token:
            break
    assert seen == [str(t.id) for t in tasks]


def test_list_omits_artifacts_and_history_unless_asked(
    as_alice: FaceClient, alice: Any, make_task: Callable[..., Task]
) -> None:
    task = make_task(alice)
    task.complete({"verdict": "pass"}, [{"artifactId": "a", "parts": [{"text": "ok"}]}])
    plain = as_alice.get("/v1/a2a/tasks").json()["tasks"][0]
    assert "artifacts" not in plain
    assert "history" not in plain
    full = as_alice.get("/v1/a2a/tasks", {"includeArtifacts": "true", "historyLength": "5"}).json()[
        "tasks"
    ][0]
    assert full["artifacts"][0]["artifactId"] == "a"
    assert full["history"][0]["messageId"] == "m-1"


def test_list_reads_no_column_it_does_not_show(
    as_alice: FaceClient, alice: Any, make_task: Callable[..., Task]
) -> None:
    """A page of tasks holding megabytes of artifacts each loaded them all (and their
    input and output, never shown), for a page that showed none of it."""
    task = make_task(alice)
    task.complete({"verdict": "pass"}, [{"artifactId": "a", "parts": [{"text": "ok"}]}])
    unshown = ('"input"', '"output"', '"outbound_message"')
    for params, also in (({}, ('"artifacts"',)), ({"includeArtifacts": "true"}, ())):
        with CaptureQueriesContext(connection) as queries:
            page = as_alice.get("/v1/a2a/tasks", params).json()
        assert [t["id"] for t in page["tasks"]] == [str(task.id)]
        reads = [q["sql"] for q in queries if '"a2a_task"."state_changed_at"' in q["sql"]]
        assert reads, [q["sql"] for q in queries]
        assert not [c for c in (*unshown, *also) for sql in reads if f'"a2a_task".{c}' in sql]
        assert ("artifacts" in page["tasks"][0]) == bool(params)


def test_list_filters_by_context_status_and_time(
    as_alice: FaceClient, alice: Any, make_task: Callable[..., Task]
) -> None:
    old = make_task(alice, context_id="ctx-a", state_changed_at=timezone.now() - timedelta(days=1))
    working = make_task(alice, context_id="ctx-b")
    working.start_work()

    def ids(**params: Any) -> list[str]:
        return [t["id"] for t in as_alice.get("/v1/a2a/tasks", params).json()["tasks"]]

    assert ids(contextId="ctx-a") == [str(old.id)]
    assert ids(status="TASK_STATE_WORKING") == [str(working.id)]
    after = (timezone.now() - timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
    assert ids(statusTimestampAfter=after) == [str(working.id)]


@pytest.mark.parametrize(
    "params",
    [
        {"pageSize": "0"},
        {"pageSize": "101"},
        {"pageSize": "ten"},
        {"status": "running"},
        {"statusTimestampAfter": "yesterday"},
        {"pageToken": "garbage!"},
        {"includeArtifacts": "maybe"},
    ],
)
def test_list_refuses_bad_parameters(as_alice: FaceClient, params: dict[str, str]) -> None:
    response = as_alice.get("/v1/a2a/tasks", params)
    assert response.status_code == 400
    assert error_reason(response) == "INVALID_PARAMS"


def test_anonymous_callers_list_only_within_a_context(
    settings: Any, alice: Any, make_task: Callable[..., Task]
) -> None:
    settings.A2A_ALLOW_ANONYMOUS = True
    anon = make_task(None, context_id="ctx-anon")
    make_task(alice, context_id="ctx-anon")
    client = FaceClient(None)
    assert client.get("/v1/a2a/tasks").json()["tasks"] == []
    listing = client.get("/v1/a2a/tasks", {"contextId": "ctx-anon"}).json()
    assert [t["id"] for t in listing["tasks"]] == [str(anon.id)]
    assert client.get(f"/v1/a2a/tasks/{anon.id}").status_code == 200


def test_cancel_of_a_finished_task_is_not_cancelable(
    as_alice: FaceClient, alice: Any, make_task: Callable[..., Task]
) -> None:
    task = make_task(alice)
    task.complete({"verdict": "pass"}, [])
    response = as_alice.post(f"/v1/a2a/tasks/{task.id}:cancel")
    assert response.status_code == 409
    assert error_reason(response) == "TASK_NOT_CANCELABLE"
    task.refresh_from_db()
    assert task.state == TaskState.COMPLETED


def test_cancel_of_an_unknown_task_is_task_not_found(as_alice: FaceClient) -> None:
    response = as_alice.post("/v1/a2a/tasks/00000000-0000-0000-0000-000000000000:cancel")
    assert error_reason(response) == "TASK_NOT_FOUND"


def test_subscribe_to_an_unknown_task_fails_before_the_stream(as_alice: FaceClient) -> None:
    response = as_alice.post("/v1/a2a/tasks/00000000-0000-0000-0000-000000000000:subscribe")
    assert response.status_code == 404
    assert response["Content-Type"] == "application/json"
    assert error_reason(response) == "TASK_NOT_FOUND"


def test_subscribe_to_a_finished_task_fails_before_the_stream(
    as_alice: FaceClient, alice: Any, make_task: Callable[..., Task]
) -> None:
    task = make_task(alice)
    task.cancel()
    response = as_alice.get(f"/v1/a2a/tasks/{task.id}:subscribe")
    assert response.status_code == 400
    assert error_reason(response) == "UNSUPPORTED_OPERATION"


def test_a_legacy_agents_shapes_reach_clients_in_1_0_form(
    as_alice: FaceClient, alice: Any, make_task: Callable[..., Task]
) -> None:
    task = make_task(alice)
    TaskMessage.objects.create(
        task=task,
        direction="from_agent",
        message_id="old",
        message={
            "kind": "message",
            "messageId": "old",
            "role": "agent",
            "parts": [
                {"kind": "text", "text": "done"},
                {"kind": "file", "file": {"uri": "https://x/r.pdf", "mimeType": "application/pdf"}},
            ],
        },
    )
    artifacts = [{"artifactId": "a", "parts": [{"kind": "data", "data": {"verdict": "pass"}}]}]
    task.complete({"verdict": "pass"}, artifacts)
    body = as_alice.get(f"/v1/a2a/tasks/{task.id}").json()
    legacy = body["history"][-1]
    assert legacy["role"] == "ROLE_AGENT"
    assert legacy["parts"] == [
        {"text": "done"},
        {"url": "https://x/r.pdf", "mediaType": "application/pdf"},
    ]
    assert body["artifacts"][0]["parts"] == [{"data": {"verdict": "pass"}}]
    assert "kind" not in _walk_keys(body)


def _forged(value: Any) -> str:
    """A pageToken made by the client, in the shape of ours (base64 of a JSON pair)."""
    return base64.urlsafe_b64encode(json.dumps(value).encode()).decode().rstrip("=")


SOME_ID = "00000000-0000-0000-0000-000000000001"


@pytest.mark.parametrize(
    "params",
    [
        {"pageToken": _forged(["2026-01-01T00:00:00Z", 5])},  # an id that is no string
        {"pageToken": _forged(["2026-01-01T00:00:00", SOME_ID])},  # no zone: never ours
        {"pageToken": _forged(["0001-01-01T00:00:00+05:00", SOME_ID])},  # before year 1 in UTC
        {"pageToken": _forged(["9999-12-31T23:59:59-05:00", SOME_ID])},  # after 9999 in UTC
        {"pageToken": base64.urlsafe_b64encode(b"[" * 5000).decode()},  # the parser recursed
    ],
)
def test_list_refuses_forged_page_tokens_on_both_bindings(
    alice: Any, make_task: Callable[..., Task], params: dict[str, str]
) -> None:
    """Each was a 500 (AttributeError, or OverflowError when the query ran). A
    statusTimestampAfter out of range is refused as no Timestamp when the params are read."""
    make_task(alice)
    client = FaceClient(alice.raw_token)
    response = client.get("/v1/a2a/tasks", params)
    assert response.status_code == 400
    assert error_reason(response) == "INVALID_PARAMS"
    field = next(iter(params))
    assert response.json()["error"]["details"][1]["fieldViolations"][0]["field"] == field
    assert client.rpc("ListTasks", params).json()["error"]["code"] == -32602
