"""/metrics: who may read it, counters that move with a task, the database gauges, the A2A
face's requests, and the multi-process mode across daphne and a Celery worker."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from django.utils import timezone
from prometheus_client.parser import text_string_to_metric_families

from a2a import agent_updates, creation
from a2a.models import Task
from a2a.states import NextAction, TaskState
from platform_site.face_metrics import operation, with_face_metrics


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """{(sample name, sorted labels): value} of a metrics page."""
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def value(page: dict[Any, float], name: str, **labels: str) -> float:
    """The sum of the samples named ``name`` whose labels include ``labels``."""
    return sum(
        v
        for (n, have), v in page.items()
        if n == name and set(labels.items()) <= set(dict(have).items())
    )


def scrape(client: Any) -> dict[Any, float]:
    response = client.get("/metrics")
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/plain")
    return samples(response.content.decode())


def test_loopback_callers_read_the_metrics(client: Any, db: None) -> None:
    assert client.get("/metrics", REMOTE_ADDR="127.0.0.1").status_code == 200
    assert client.get("/metrics", REMOTE_ADDR="::1").status_code == 200


def test_other_callers_need_the_metrics_token(client: Any, db: None, settings: Any) -> None:
    settings.METRICS_TOKEN = ""
    assert client.get("/metrics", REMOTE_ADDR="10.1.2.3").status_code == 403
    settings.METRICS_TOKEN = "s3cret-metrics"
    assert client.get("/metrics", REMOTE_ADDR="10.1.2.3").status_code == 403
    wrong = {"HTTP_AUTHORIZATION": "Bearer nope"}
    assert client.get("/metrics", REMOTE_ADDR="10.1.2.3", **wrong).status_code == 403
    right = {"HTTP_AUTHORIZATION": "Bearer s3cret-metrics"}
    assert client.get("/metrics", REMOTE_ADDR="10.1.2.3", **right).status_code == 200


def test_a_proxied_request_is_not_a_loopback_caller(client: Any, db: None) -> None:
    proxied = {"HTTP_X_FORWARDED_FOR": "203.0.113.9"}
    assert client.get("/metrics", REMOTE_ADDR="127.0.0.1", **proxied).status_code == 403


def test_counters_move_with_a_task_from_creation_to_its_end(
    client: Any,
    make_skill: Any,
    make_agent: Any,
    make_user: Any,
    django_capture_on_commit_callbacks: Any,
) -> None:
    skill = make_skill()
    make_agent(skills=[skill])
    before = scrape(client)
    with django_capture_on_commit_callbacks(execute=True):
        task = creation.create_task(skill_id=skill.id, input={"product": "lamp"}, user=make_user())
    with django_capture_on_commit_callbacks(execute=True):
        artifacts = [{"parts": [{"data": {"verdict": "pass"}}]}]
        agent_updates.apply_agent_update(
            task, status={"state": "completed"}, artifacts=artifacts, via="a2a"
        )
    after = scrape(client)
    labels = {"skill": "ce-review", "agent": "agent-one"}

    def moved(name: str, **extra: str) -> float:
        return value(after, name, **extra) - value(before, name, **extra)

    assert moved("a2a_tasks_created_total", **labels) == 1
    completed = {**labels, "state": TaskState.COMPLETED, "error_code": ""}
    assert moved("a2a_tasks_ended_total", **completed) == 1
    assert moved("a2a_task_duration_seconds_count", state=TaskState.COMPLETED) == 1
    assert moved("a2a_agent_updates_total", via="a2a") == 1
    assert value(after, "a2a_tasks", state=TaskState.COMPLETED) >= 1


def test_a_failure_is_counted_by_its_error_code(
    client: Any,
    make_skill: Any,
    make_agent: Any,
    make_user: Any,
    django_capture_on_commit_callbacks: Any,
) -> None:
    skill = make_skill()
    make_agent(skills=[skill])
    task = creation.create_task(skill_id=skill.id, input={"product": "lamp"}, user=make_user())
    before = scrape(client)
    with django_capture_on_commit_callbacks(execute=True):
        task.fail("agent_unreachable", "Could not reach the agent")
    after = scrape(client)
    failed = {"state": TaskState.FAILED, "error_code": "agent_unreachable"}
    assert (
        value(after, "a2a_tasks_ended_total", **failed)
        - value(before, "a2a_tasks_ended_total", **failed)
        == 1
    )


def test_a_canceled_task_is_counted_without_the_error_it_met_on_the_way(
    client: Any,
    make_skill: Any,
    make_agent: Any,
    make_user: Any,
    django_capture_on_commit_callbacks: Any,
    caplog: Any,
) -> None:
    """docs/operations.md: error_code is empty for COMPLETED and CANCELED. A poll that
    failed while the task worked stays on it as ``task.error``; it is not why it ended."""
    from a2a.services import cancel_task

    skill = make_skill()
    make_agent(skills=[skill])
    user = make_user()
    task = creation.create_task(skill_id=skill.id, input={"product": "lamp"}, user=user)
    error = {"code": "cannot_follow", "message": "cannot follow", "details": None}
    Task.objects.filter(pk=task.pk).update(state=TaskState.WORKING, error=error)
    task.refresh_from_db()
    before = scrape(client)
    with (
        caplog.at_level("INFO", logger="a2a.lifecycle"),
        django_capture_on_commit_callbacks(execute=True),
    ):
        cancel_task(task, by=user, reason="not needed")
    after = scrape(client)
    canceled = {"state": TaskState.CANCELED}
    ended = value(after, "a2a_tasks_ended_total", **canceled, error_code="")
    assert ended - value(before, "a2a_tasks_ended_total", **canceled, error_code="") == 1
    assert value(after, "a2a_tasks_ended_total", error_code="cannot_follow") == value(
        before, "a2a_tasks_ended_total", error_code="cannot_follow"
    )
    [line] = [r.getMessage() for r in caplog.records if " ended " in r.getMessage()]
    assert "cannot_follow" not in line


def test_the_sweep_lag_is_how_overdue_the_oldest_due_task_is(
    client: Any, make_skill: Any, make_agent: Any, make_user: Any
) -> None:
    skill = make_skill()
    make_agent(skills=[skill])
    task = creation.create_task(skill_id=skill.id, input={"product": "lamp"}, user=make_user())
    Task.objects.filter(pk=task.pk).update(
        next_action=NextAction.POLL, next_poll_at=timezone.now() - timedelta(seconds=30)
    )
    assert value(scrape(client), "a2a_sweep_lag_seconds") >= 30
    Task.objects.filter(pk=task.pk).update(next_action=NextAction.NONE, next_poll_at=None)
    assert value(scrape(client), "a2a_sweep_lag_seconds") == 0


def test_a_database_outage_leaves_out_its_gauges_and_serves_the_rest(
    client: Any, db: None, monkeypatch: Any
) -> None:
    """The database gauges failing turned the whole page into a 503: every counter of the
    process went missing just when an operator needed them."""
    from django.db.utils import OperationalError

    from a2a import observe

    page = scrape(client)
    assert value(page, "a2a_database_up") == 1
    assert ("a2a_tasks", (("state", TaskState.COMPLETED),)) in page
    monkeypatch.setattr(observe, "Count", _raise(OperationalError("connection refused")))
    down = scrape(client)
    assert value(down, "a2a_database_up") == 0
    names = {name for name, _ in down}
    assert not names & {"a2a_tasks", "a2a_sweep_lag_seconds"}  # the failed reader's gauges
    assert "python_gc_collections_total" in names  # the process's own metrics


def _raise(exc: Exception) -> Any:
    def fail(*args: Any, **kwargs: Any) -> Any:
        raise exc

    return fail


@pytest.mark.postgres
def test_a_database_gauge_slower_than_the_probe_timeout_is_cut_off(client: Any, db: None) -> None:
    """A scrape waits at most PROBE_TIMEOUT (2 s) for a database statement (a lock wait,
    an overloaded server), then answers without those gauges."""

    from django.db import connection
    from prometheus_client.core import GaugeMetricFamily

    from platform_site import metrics

    def slow() -> Any:
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_sleep(6)")
        yield GaugeMetricFamily("a2a_test_slow", "never shown", value=1)

    metrics.add_scrape_collector(slow)
    try:
        page = scrape(client)  # the statement cut off: its gauges left out
    finally:
        metrics._scrape_collectors.remove(slow)
    assert value(page, "a2a_database_up") == 0
    assert not any(name == "a2a_test_slow" for name, _ in page)


def test_calls_to_agents_are_counted_and_timed_by_agent_binding_and_operation(
    client: Any, db: None
) -> None:
    from a2a.exceptions import A2ATransientError
    from a2a.transports.http import agent_call
    from agent_profiles.interfaces import CallTarget

    target = CallTarget(agent_id="agent-m", binding="JSONRPC", version="0.3")
    before = scrape(client)
    with agent_call(target, "get_task"):
        pass
    with pytest.raises(A2ATransientError), agent_call(target, "send"):
        raise A2ATransientError("down", code="agent_unreachable")
    after = scrape(client)
    labels = {"agent": "agent-m", "binding": "JSONRPC/0.3"}

    def moved(name: str, **extra: str) -> float:
        return value(after, name, **labels, **extra) - value(before, name, **labels, **extra)

    assert moved("a2a_agent_calls_total", operation="get_task", outcome="ok") == 1
    assert moved("a2a_agent_calls_total", operation="send", outcome="agent_unreachable") == 1
    assert moved("a2a_agent_call_duration_seconds_count", operation="send") == 1


@pytest.mark.parametrize(
    ("path", "method", "op"),
    [
        ("/v1/a2a/message:send", "POST", "SendMessage"),
        ("/v1/a2a/agent-x/message:stream", "POST", "SendStreamingMessage"),
        ("/v1/a2a/tasks", "GET", "ListTasks"),
        ("/v1/a2a/agent-x/tasks/t1", "GET", "GetTask"),
        ("/v1/a2a/tasks/t1:cancel", "POST", "CancelTask"),
        ("/v1/a2a/tasks/t1/pushNotificationConfigs", "POST", "CreatePushConfig"),
        ("/v1/a2a/tasks/t1/pushNotificationConfigs/c1", "DELETE", "DeletePushConfig"),
        ("/.well-known/agent-card.json", "GET", "AgentCard"),
        ("/api/tasks", "GET", None),
    ],
)
def test_face_requests_are_named_by_operation(path: str, method: str, op: str | None) -> None:
    assert operation(path, method) == op


def test_face_requests_are_counted_with_their_status(client: Any, db: None) -> None:
    async def app(scope: Any, receive: Any, send: Any) -> None:
        await send({"type": "http.response.start", "status": 404, "headers": []})
        await send({"type": "http.response.body", "body": b""})

    async def call() -> None:
        sent: list[Any] = []

        async def send(message: Any) -> None:
            sent.append(message)

        scope = {"type": "http", "path": "/v1/a2a/tasks/nope", "method": "GET"}
        await with_face_metrics(app)(scope, None, send)
        assert sent[0]["status"] == 404

    before = value(scrape(client), "a2a_face_requests_total", operation="GetTask", status="404")
    asyncio.run(call())
    after = value(scrape(client), "a2a_face_requests_total", operation="GetTask", status="404")
    assert after - before == 1


@pytest.mark.distributed
@pytest.mark.slow
def test_daphne_serves_the_worker_processes_counters_in_multi_process_mode(
    transactional_db: None, tmp_path: Path, make_skill: Any, make_agent: Any, make_user: Any
) -> None:
    from tests.a2a.helpers import wait_for
    from tests.support.agents import run_agent
    from tests.support.processes import beat_proc, daphne_process, started, worker_proc

    env = {
        "PROMETHEUS_MULTIPROC_DIR": str(tmp_path),
        "A2A_POLL_INTERVAL": 0.2,
        "A2A_SWEEP_INTERVAL": 0.3,
        "ALLOW_LOOPBACK_URLS": True,
    }
    skill = make_skill()
    user = make_user()
    with run_agent() as peer, daphne_process(**env) as daphne:
        make_agent(skills=[skill], a2a_endpoint=peer.url)
        url = daphne.url  # type: ignore[attr-defined]
        before = samples(httpx.get(f"{url}/metrics").text)
        with started(worker_proc(**env), beat_proc(**env)):
            headers = {"Authorization": f"Bearer {user.raw_token}"}
            body = {"skillId": skill.id, "input": {"product": "lamp", "behaviour": "complete"}}
            created = httpx.post(f"{url}/api/tasks", json=body, headers=headers)
            assert created.status_code == 201, created.text
            wait_for(Task.objects.get(pk=created.json()["id"]), timeout=30)
        after = samples(httpx.get(f"{url}/metrics").text)
    done = {"state": TaskState.COMPLETED, "skill": skill.id}
    # created in daphne, ended in the worker: one page shows both processes' counters
    assert (
        value(after, "a2a_tasks_created_total", skill=skill.id)
        - value(before, "a2a_tasks_created_total", skill=skill.id)
        == 1
    )
    assert (
        value(after, "a2a_tasks_ended_total", **done)
        - value(before, "a2a_tasks_ended_total", **done)
        == 1
    )
    # the CPU of the API's threads (daphne) and the worker's (celery), on the same page
    for stage in ("tasks-api", "worker"):
        moved = value(after, "a2a_cpu_seconds_total", stage=stage) - value(
            before, "a2a_cpu_seconds_total", stage=stage
        )
        assert moved > 0, stage
    assert len(list(tmp_path.glob("*.db"))) >= 2  # files of more than one process
