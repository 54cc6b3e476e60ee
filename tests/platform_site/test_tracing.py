"""Traces: a platform task is one connected trace from its creation through sends, polls,
the question, a person's reply and its end, and the agent receives W3C ``traceparent``.

Runs the embedded worker and a real a2a-sdk agent in this process, with the SDK's
in-memory exporter."""

from __future__ import annotations

import time
from typing import Any

import pytest
from django.test import override_settings
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from a2a import creation, services
from a2a.states import TaskState
from platform_site import tracing
from tests.a2a.helpers import embedded_workers, wait_for
from tests.support.agents import run_agent

FAST = {"A2A_POLL_INTERVAL": 0.1, "A2A_POLL_INTERVAL_MAX": 0.3, "A2A_SWEEP_INTERVAL": 0.3}
# The agent runs on loopback, which the distributed settings refuse by default.
LOOPBACK = {"ALLOW_LOOPBACK_URLS": True}


@pytest.mark.slow
def test_a_task_with_a_question_and_a_reply_is_one_trace_and_the_agent_sees_it(
    spans: InMemorySpanExporter,
    transactional_db: None,
    make_skill: Any,
    make_agent: Any,
    make_user: Any,
) -> None:
    with (
        override_settings(**FAST, **LOOPBACK),
        run_agent() as peer,
        embedded_workers(sweep_interval=FAST["A2A_SWEEP_INTERVAL"]),
    ):
        skill = make_skill()
        make_agent(skills=[skill], a2a_endpoint=peer.url)
        task = creation.create_task(
            skill_id=skill.id, input={"product": "lamp", "behaviour": "ask"}, user=make_user()
        )
        wait_for(task, lambda t: t.state == TaskState.INPUT_REQUIRED, timeout=20)
        services.reply_to_task(task, text="EU")
        wait_for(task, timeout=20)
    assert task.state == TaskState.COMPLETED

    traceparent = task.metadata["trace"]["traceparent"]
    trace_id = int(traceparent.split("-")[1], 16)

    def finished() -> list[Any]:
        return [s for s in spans.get_finished_spans() if s.context.trace_id == trace_id]

    # The end's span is made after the commit the test saw, on the worker's thread.
    deadline = time.monotonic() + 10
    while not any(s.name == "a2a.task.end" for s in finished()):
        assert time.monotonic() < deadline, [s.name for s in finished()]
        time.sleep(0.05)
    mine = finished()
    names = [s.name for s in mine]
    # one trace: created, sent (the task, then the reply), asked, ended
    assert names.count("a2a.task.create") == 1
    assert names.count("a2a.task.send") == 2
    assert "a2a.task.transition" in names  # INPUT_REQUIRED, then WORKING after the reply
    assert names.count("a2a.task.end") == 1
    task_spans = [s for s in mine if s.name.startswith("a2a.task.")]
    assert {s.attributes["a2a.task.id"] for s in task_spans} == {str(task.pk)}
    assert {s.attributes["a2a.agent.id"] for s in task_spans} == {"agent-one"}
    assert {s.attributes["a2a.skill.id"] for s in task_spans} == {skill.id}
    end = next(s for s in mine if s.name == "a2a.task.end")
    assert end.attributes["a2a.task.state"] == TaskState.COMPLETED
    assert end.attributes["a2a.agent.task_id"] == task.remote_task_id
    states = {s.attributes.get("a2a.task.state") for s in mine if s.name == "a2a.task.transition"}
    assert TaskState.INPUT_REQUIRED in states
    # connected: every span's parent is a span of this trace (the root has none)
    ids = {s.context.span_id for s in mine}
    roots = [s for s in mine if s.parent is None or s.parent.span_id not in ids]
    assert [s.name for s in roots] == ["a2a.task.create"]
    # the calls to the agent are httpx spans in the trace, and carried traceparent
    calls = [s for s in mine if s.kind.name == "CLIENT"]
    assert len(calls) >= 2  # the send, (polls, when the agent was not done at once,) the reply
    plain = [s for s in calls if "url.full" in s.attributes]  # urllib3's, not httpx's
    assert plain
    assert {s.attributes.get("http.response.status_code") for s in plain} == {200}
    seen = [h["traceparent"] for path, h in peer.trace_headers if "traceparent" in h]
    assert any(int(value.split("-")[1], 16) == trace_id for value in seen)


def test_tracing_is_off_unless_an_exporter_is_named(monkeypatch: Any) -> None:
    monkeypatch.delenv("OTEL_TRACES_EXPORTER", raising=False)
    assert tracing.setup() is False
    monkeypatch.setenv("OTEL_TRACES_EXPORTER", "none")
    assert tracing.setup() is False
    assert not tracing.enabled()


def test_an_unknown_exporter_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match="otlp, console or none"):
        tracing._exporter("zipkin-ish")
