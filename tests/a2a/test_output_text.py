"""Outputs written as text, as agents built on language models answer: JSON in a Markdown
code block, JSON streamed in chunks appended to one artifact, and prose. A structured
value anywhere (a data part, JSON in text) wins over text; the artifacts' text alone is
the output, so a skill whose ``output_schema`` is a string takes a prose answer, and one
that wants an object fails it saying what the agent wrote. Runs on SQLite and
PostgreSQL."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from a2a.agent_updates import apply_agent_reply
from a2a.states import TaskState
from a2a.wire import task_output
from tests.a2a.test_held_sends import start, step
from tests.support.agents import TestAgent, run_agent

VERDICT = {"verdict": "pass"}


def artifact(*texts: str, **more: Any) -> dict[str, Any]:
    return {"artifactId": "a", "parts": [{"text": t} for t in texts], **more}


def said(*texts: str) -> dict[str, Any]:
    return {"messageId": "m", "role": "ROLE_AGENT", "parts": [{"text": t} for t in texts]}


@pytest.mark.parametrize(
    ("artifacts", "status_message", "history", "output"),
    [
        ([artifact('{"verdict": "pass"}')], None, None, VERDICT),
        ([artifact('```json\n{"verdict": "pass"}\n```')], None, None, VERDICT),
        ([artifact('  ```\n{"verdict": "pass"}\n```  ')], None, None, VERDICT),
        # Streamed in chunks: no chunk is JSON, all of them together are.
        ([artifact('```json\n{"ver', 'dict": "pa', 'ss"}\n```')], None, None, VERDICT),
        # A data part wins over any text.
        ([artifact("Here it is:"), {"parts": [{"data": VERDICT}]}], None, None, VERDICT),
        # A value in the history wins over the completing status's text.
        ([], said("Done."), [said('{"verdict": "pass"}')], VERDICT),
        # Prose: the text itself, chunks joined as written, artifacts one per line.
        ([artifact("Looks ", "good.")], None, None, "Looks good."),
        ([artifact("One."), artifact("Two.")], None, None, "One.\nTwo."),
        # Not a status message's text, nor the history's: "Task completed" is said there.
        ([], said("Task completed."), [said("Earlier."), said("Last.")], None),
        ([artifact("{not json")], None, None, "{not json"),
        # A code block among prose is prose.
        ([artifact("See ```json\n{}\n```")], None, None, "See ```json\n{}\n```"),
        ([artifact("  "), {"parts": "junk"}, "junk"], {"parts": []}, None, None),
        ([], None, None, None),
    ],
)
def test_the_output_of_a_completed_task(
    artifacts: Any, status_message: Any, history: Any, output: Any
) -> None:
    assert task_output(artifacts, status_message, history) == output


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(
    ("schema", "state", "output"),
    [
        ({"type": "string", "minLength": 1}, TaskState.COMPLETED, "Looks good."),
        ({"type": "object"}, TaskState.FAILED, None),
    ],
)
def test_a_prose_answer_is_validated_as_a_string(
    make_skill: Any, make_agent: Any, make_user: Any, schema: Any, state: str, output: Any
) -> None:
    make_agent(skills=[make_skill(output_schema=schema)])
    task = start(make_user(), "complete")
    remote = {"id": "t-1", "status": {"state": "TASK_STATE_COMPLETED"}}
    remote["artifacts"] = [artifact("Looks good.")]
    apply_agent_reply(task, task_json=remote, message=None, via="a2a")
    task.refresh_from_db()
    assert (task.state, task.output) == (state, output)
    if state == TaskState.FAILED:
        assert task.error["code"] == "output_invalid"
        assert task.error["details"]["output"] == "Looks good."
        assert "is not of type 'object'" in task.error["message"]


@pytest.fixture
def peer() -> Iterator[TestAgent]:
    with run_agent() as agent:
        yield agent


@pytest.mark.django_db(transaction=True)
def test_json_a_real_agent_streams_in_chunks_is_the_output(
    peer: TestAgent, make_skill: Any, make_agent: Any, make_user: Any, settings: Any
) -> None:
    """An a2a-sdk agent appends the chunks to one artifact as parts; the platform's poll
    reads them back as the agent's task store keeps them."""
    settings.ALLOW_LOOPBACK_URLS = True
    settings.A2A_LIST_INTERVAL = 0
    make_agent(skills=[make_skill()], a2a_endpoint=peer.url)
    task = step(start(make_user(), "written", size=5))
    for _ in range(10):
        if task.is_terminal:
            break
        task = step(task)
    assert (task.state, task.output) == (TaskState.COMPLETED, VERDICT)
    assert len(task.artifacts[0]["parts"]) > 5  # the chunks, as the agent keeps them
