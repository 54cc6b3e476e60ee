"""``POST /api/tasks:batch``: per-item results in order, idempotency per item, refused
items write nothing while the others are created, and the batch shares its work."""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.conf import settings
from django.db import connection
from django.test.utils import CaptureQueriesContext
from rest_framework.test import APIClient

from a2a import batch, lookups
from a2a.models import Task, TaskEvent, TaskMessage
from a2a.states import NextAction, TaskState

pytestmark = pytest.mark.django_db

URL = "/api/tasks:batch"


def client_for(who: Any) -> APIClient:
    client = APIClient()
    token = getattr(who, "raw_token", None) or getattr(who, "raw_key", None)
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    return client


@pytest.fixture
def api(user: Any) -> APIClient:
    return client_for(user)


def item(**body: Any) -> dict[str, Any]:
    body.setdefault("skillId", "ce-review")
    body.setdefault("input", {"product": "lamp"})
    return body


def post(api: APIClient, items: Any) -> Any:
    return api.post(URL, {"tasks": items}, format="json")


def test_it_creates_each_task_and_answers_in_order(api: APIClient, agent: Any) -> None:
    products = ["lamp", "chair", "kettle"]
    response = post(api, [item(input={"product": p}) for p in products])
    assert response.status_code == 200, response.content
    results = response.json()["results"]
    assert [r["status"] for r in results] == [201, 201, 201]
    assert [r["task"]["input"]["product"] for r in results] == products
    assert all(r["task"]["state"] == TaskState.SUBMITTED for r in results)
    assert all(r["task"]["metadata"]["match"]["agentId"] == "agent-one" for r in results)
    stored = Task.objects.filter(pk__in=[r["task"]["id"] for r in results])
    assert {t.next_action for t in stored} == {NextAction.SEND}
    assert TaskEvent.objects.count() == 3
    assert TaskMessage.objects.count() == 3


def test_a_bad_item_gets_its_error_and_the_others_are_created(api: APIClient, agent: Any) -> None:
    response = post(
        api,
        [
            item(input={"product": "lamp"}),
            item(skillId="nope"),
            item(input={"market": "EU"}),
            "not an object",
            {"input": {"product": "x"}},
            item(agentId="ghost"),
            item(input={"product": "chair"}),
        ],
    )
    assert response.status_code == 200
    results = response.json()["results"]
    assert [r["status"] for r in results] == [201, 400, 400, 400, 400, 400, 201]
    codes = [r.get("error", {}).get("code") for r in results]
    assert codes == [
        None,
        "unknown_skill",
        "input_invalid",
        "validation_error",
        "validation_error",
        "unknown_agent",
        None,
    ]
    for refused in results[1:6]:
        assert "task" not in refused
        assert refused["error"]["message"]
    # The refused items wrote nothing: two tasks, each with its one event and message.
    assert Task.objects.count() == 2
    assert TaskEvent.objects.count() == 2
    assert TaskMessage.objects.count() == 2


def test_an_item_gets_the_same_error_as_post_api_tasks(api: APIClient, agent: Any) -> None:
    single = api.post("/api/tasks", item(input={"market": 7}), format="json").json()
    batched = post(api, [item(input={"market": 7})]).json()["results"][0]
    assert batched == {"status": 400, "error": single["error"]}


def test_idempotency_keys_are_honoured_per_item(api: APIClient, agent: Any) -> None:
    earlier = api.post("/api/tasks", item(idempotencyKey="k1"), format="json").json()
    response = post(
        api,
        [
            item(idempotencyKey="k1"),  # repeats an earlier request: that task
            item(idempotencyKey="k1", input={"product": "chair"}),  # reused for other input
            item(idempotencyKey="k2"),  # new
            item(idempotencyKey="k2"),  # repeats the item before: the same new task
            item(idempotencyKey="k2", input={"product": "chair"}),  # conflicts with it
        ],
    )
    results = response.json()["results"]
    assert [r["status"] for r in results] == [200, 409, 201, 200, 409]
    assert results[0]["task"]["id"] == earlier["id"]
    assert results[1]["error"]["code"] == "idempotency_conflict"
    assert results[3]["task"]["id"] == results[2]["task"]["id"]
    assert results[4]["error"]["code"] == "idempotency_conflict"
    assert Task.objects.count() == 2
    # The whole batch again: nothing new.
    again = post(api, [item(idempotencyKey="k1"), item(idempotencyKey="k2")]).json()
    assert [r["status"] for r in again["results"]] == [200, 200]
    assert Task.objects.count() == 2


def test_a_key_refused_in_one_item_may_be_used_by_a_later_one(api: APIClient, agent: Any) -> None:
    response = post(
        api, [item(idempotencyKey="k", input={"market": "EU"}), item(idempotencyKey="k")]
    )
    assert [r["status"] for r in response.json()["results"]] == [400, 201]


@pytest.mark.parametrize(
    "repeat",
    [
        {"skillId": "nope", "input": {"product": "lamp"}},  # 400 unknown_skill
        {"skillId": "ce-review", "input": {"market": "EU"}},  # 400 input_invalid
    ],
    ids=["unknown-skill", "bad-input"],
)
def test_a_repeated_key_is_checked_as_post_api_tasks_checks_it(
    api: APIClient, agent: Any, repeat: dict[str, Any]
) -> None:
    """The skill and input are checked before the key (as a single creation does): a
    repeat asking for a bad one gets that 400, not 409, whichever request had the key."""
    api.post("/api/tasks", item(idempotencyKey="k1"), format="json")
    single = api.post("/api/tasks", {**repeat, "idempotencyKey": "k1"}, format="json")
    assert single.status_code == 400
    results = post(
        api,
        [
            {**repeat, "idempotencyKey": "k1"},  # the key of an earlier request
            item(idempotencyKey="k2"),
            {**repeat, "idempotencyKey": "k2"},  # the key of an item before it
        ],
    ).json()["results"]
    expected = {"status": 400, "error": single.json()["error"]}
    assert [results[0], results[2]] == [expected, expected]
    assert results[1]["status"] == 201
    assert Task.objects.count() == 2


def test_an_item_keyed_with_only_blanks_is_refused_alone(api: APIClient, agent: Any) -> None:
    results = post(
        api, [item(idempotencyKey="  "), item(idempotencyKey="k "), item(idempotencyKey="k")]
    ).json()["results"]
    assert [r["status"] for r in results] == [400, 201, 201]
    assert results[0]["error"]["code"] == "validation_error"
    assert "idempotencyKey" in results[0]["error"]["details"]
    assert results[1]["task"]["id"] != results[2]["task"]["id"]  # "k " is not "k"


class _Deadlock(Exception):
    sqlstate = "40P01"  # what psycopg sets for "deadlock detected"


@pytest.mark.parametrize(
    ("cause", "answer"),
    [(_Deadlock(), 200), (None, 503)],
    ids=["deadlock-one-by-one", "outage-whole-503"],
)
def test_a_batch_losing_a_deadlock_falls_back_to_one_by_one(
    api: APIClient, agent: Any, monkeypatch: pytest.MonkeyPatch, cause: Any, answer: int
) -> None:
    """Two batches sharing keys may deadlock on the unique index; PostgreSQL rolls one
    back whole. That one goes one by one (each item its own answer), while the database
    being away stays the 503 of the whole request, nothing written."""
    from django.db import OperationalError

    real = batch.insert

    def losing(new: Any) -> None:
        if len(new) > 1:
            real(new)  # the rows go in, then the transaction is rolled back
            raise OperationalError("deadlock detected") from cause
        real(new)

    monkeypatch.setattr(batch, "insert", losing)
    api.raise_request_exception = False
    response = post(api, [item(idempotencyKey="a"), item(), item(idempotencyKey="a")])
    assert response.status_code == answer, response.content
    if answer == 200:
        results = response.json()["results"]
        assert [r["status"] for r in results] == [201, 201, 200]
        assert results[2]["task"]["id"] == results[0]["task"]["id"]
        assert Task.objects.count() == 2
    else:
        assert response.json()["error"]["code"] == "unavailable"
        assert not Task.objects.exists()


def test_a_key_taken_concurrently_falls_back_to_one_by_one(
    api: APIClient, agent: Any, user: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from a2a import creation

    earlier = creation.create_task(
        skill_id="ce-review", input={"product": "lamp"}, user=user, idempotency_key="raced"
    )
    # As if the other request committed after the batch read the caller's keys.
    monkeypatch.setattr(batch, "_earlier_tasks", lambda user, keys: {})
    response = post(api, [item(), item(idempotencyKey="raced"), item(input={"product": "x"})])
    results = response.json()["results"]
    assert [r["status"] for r in results] == [201, 200, 201]
    assert results[1]["task"]["id"] == str(earlier.id)
    assert Task.objects.count() == 3


def test_matching_counts_the_batchs_own_picks(api: APIClient, make_agent: Any, skill: Any) -> None:
    make_agent(id="agent-a", skills=[skill])
    make_agent(id="agent-b", skills=[skill])
    results = post(api, [item() for _ in range(4)]).json()["results"]
    chosen = sorted(r["task"]["agentId"] for r in results)
    assert chosen == ["agent-a", "agent-a", "agent-b", "agent-b"]


def test_the_batch_shares_its_queries(api: APIClient, agent: Any) -> None:
    post(api, [item()])  # warm the skill and candidate caches
    with CaptureQueriesContext(connection) as few:
        post(api, [item(idempotencyKey=f"a{i}") for i in range(2)])
    with CaptureQueriesContext(connection) as many:
        post(api, [item(idempotencyKey=f"b{i}") for i in range(20)])
    assert len(many) == len(few)
    # one per row kind: tasks, events, messages (on PostgreSQL one single-row statement
    # run for every row, sent together: "20 times: INSERT ...")
    statements = [q["sql"] for q in many.captured_queries]
    inserts = [sql for sql in statements if re.match(r"(\d+ times: )?INSERT", sql)]
    assert len(inserts) == 3


def test_the_batch_is_started_with_one_message(
    api: APIClient,
    agent: Any,
    monkeypatch: pytest.MonkeyPatch,
    django_capture_on_commit_callbacks: Any,
) -> None:
    from a2a import tasks

    sent: list[list[str]] = []
    monkeypatch.setattr(tasks.process_many, "delay", lambda ids: sent.append(ids))
    monkeypatch.setattr(settings, "A2A_HINT_QUEUE", False)  # a live worker's list: not here
    with django_capture_on_commit_callbacks(execute=True):
        results = post(api, [item() for _ in range(3)]).json()["results"]
    assert sent == [[r["task"]["id"] for r in results]]


@pytest.mark.parametrize(
    "body",
    [{}, {"tasks": "lamp"}, {"tasks": {"skillId": "ce-review"}}, [item()], "tasks"],
)
def test_a_body_that_is_not_a_batch_is_a_400(api: APIClient, agent: Any, body: Any) -> None:
    response = api.post(URL, body, format="json")
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "validation_error"
    assert not Task.objects.exists()


def test_a_batch_over_the_limit_is_refused_whole(api: APIClient, agent: Any, settings: Any) -> None:
    settings.TASKS_BATCH_MAX = 3
    response = post(api, [item() for _ in range(4)])
    assert response.status_code == 400
    assert "TASKS_BATCH_MAX" in response.json()["error"]["message"]
    assert not Task.objects.exists()


def test_an_empty_batch_creates_nothing(api: APIClient, agent: Any) -> None:
    response = post(api, [])
    assert response.status_code == 200
    assert response.json() == {"results": []}


def test_it_is_for_platform_users_only(agent: Any) -> None:
    assert APIClient().post(URL, {"tasks": [item()]}, format="json").status_code in (401, 403)
    assert client_for(agent).post(URL, {"tasks": [item()]}, format="json").status_code == 403
    assert not Task.objects.exists()


def test_malformed_json_is_a_400(api: APIClient, agent: Any) -> None:
    response = api.post(URL, "{not json", content_type="application/json")
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "malformed_json"


def test_small_batches_share_the_load_count_of_the_process(
    api: APIClient, make_agent: Any, skill: Any, settings: Any
) -> None:
    # A stream of small batches (a client sending tasks as they come) must not count
    # every active task of the skill's agents per request: that count grows with the
    # tasks in flight. Counted once per A2A_LOAD_CACHE_SECONDS, each pick counted in.
    make_agent(id="agent-a", skills=[skill])
    make_agent(id="agent-b", skills=[skill])
    settings.A2A_LOAD_CACHE_SECONDS = 60
    first = post(api, [item()]).json()["results"][0]["task"]["agentId"]
    with CaptureQueriesContext(connection) as queries:
        second = post(api, [item()]).json()["results"][0]["task"]["agentId"]
    assert {first, second} == {"agent-a", "agent-b"}  # the first pick counted in
    assert not [q for q in queries.captured_queries if "COUNT(" in q["sql"].upper()]
    settings.A2A_LOAD_CACHE_SECONDS = 0
    lookups.clear()
    with CaptureQueriesContext(connection) as queries:
        post(api, [item()])
    assert [q for q in queries.captured_queries if "COUNT(" in q["sql"].upper()]
