"""historyLength reads only the messages it keeps: GetTask, ListTasks and the subscribe
snapshot read every message of a task (a thousand, for a client asking for the last one)
and kept the last N in Python."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from a2a.face.sse import snapshot
from a2a.models import Task
from tests.a2a_face.conftest import FaceClient, talk

pytestmark = pytest.mark.django_db


def test_get_reads_only_the_messages_history_length_keeps(
    as_alice: FaceClient,
    alice: Any,
    make_task: Callable[..., Task],
    loaded_messages: list[str],
) -> None:
    """historyLength=3 of a long conversation read every message of it, to keep three."""
    task = make_task(alice)
    ids = talk(task, 30)
    body = as_alice.get(f"/v1/a2a/tasks/{task.id}", {"historyLength": 3}).json()
    assert [m["messageId"] for m in body["history"]] == ids[-3:]
    assert loaded_messages == ids[:-4:-1]  # read newest first, shown oldest first
    loaded_messages.clear()
    whole = as_alice.get(f"/v1/a2a/tasks/{task.id}").json()
    assert [m["messageId"] for m in whole["history"]] == ids


def test_list_reads_only_the_messages_history_length_keeps(
    as_alice: FaceClient,
    alice: Any,
    make_task: Callable[..., Task],
    loaded_messages: list[str],
) -> None:
    first, second = make_task(alice), make_task(alice)
    first_ids, second_ids = talk(first, 12), talk(second, 1)
    page = as_alice.get("/v1/a2a/tasks", {"historyLength": "2"}).json()["tasks"]
    shown = {t["id"]: [m["messageId"] for m in t["history"]] for t in page}
    assert shown == {str(first.id): first_ids[-2:], str(second.id): second_ids[-2:]}
    assert sorted(loaded_messages) == sorted(first_ids[-2:] + second_ids[-2:])


def test_subscribe_snapshot_reads_only_the_kept_messages(
    alice: Any, make_task: Callable[..., Task], loaded_messages: list[str]
) -> None:
    task = make_task(alice)
    ids = talk(task, 8)
    found = snapshot(task.id, with_history=True, history_length=2)
    assert found is not None
    assert [m["messageId"] for m in found["task"]["history"]] == ids[-2:]
    assert sorted(loaded_messages) == sorted(ids[-2:])
