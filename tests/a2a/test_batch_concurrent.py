"""Concurrent batches sharing idempotency keys on PostgreSQL: each item gets its own
answer (the task, once), never a whole-batch error, whatever order the keys come in.

Two batches inserting the same keys in opposite orders took the unique index's entries
crosswise and deadlocked; PostgreSQL rolled one back and it answered 503 for the whole
batch. The rows go in sorted by key now, and a batch losing a deadlock all the same
(a single creation crossing it) goes one by one like a batch losing a key.
"""

from __future__ import annotations

import contextlib
import threading
from typing import Any

import pytest
from django.db import connections
from rest_framework.test import APIClient

from a2a import batch
from a2a.models import Task
from tests.a2a.test_batch_api import URL, client_for

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


def keyed(keys: list[str]) -> dict[str, Any]:
    items = [{"skillId": "ce-review", "input": {"product": k}, "idempotencyKey": k} for k in keys]
    return {"tasks": items}


def post_together(user: Any, bodies: list[dict[str, Any]], monkeypatch: Any) -> list[Any]:
    """Post the bodies from as many threads, their batch INSERTs started together."""
    ready = threading.Barrier(len(bodies), timeout=10)
    real = batch.insert

    def insert(new: Any) -> None:
        if len(new) > 1:  # the batch's INSERT, not the one-by-one fallback's
            with contextlib.suppress(threading.BrokenBarrierError):
                ready.wait()
        real(new)

    monkeypatch.setattr(batch, "insert", insert)
    answers: list[Any] = [None] * len(bodies)

    def run(i: int) -> None:
        client: APIClient = client_for(user)
        client.raise_request_exception = False
        try:
            answers[i] = client.post(URL, bodies[i], format="json")
        finally:
            connections.close_all()

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(bodies))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    return answers


def test_batches_with_the_same_keys_in_opposite_orders_answer_per_item(
    user: Any, agent: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    keys = [f"k{i}" for i in range(40)]
    first, second = post_together(user, [keyed(keys), keyed(keys[::-1])], monkeypatch)
    for response in (first, second):
        assert response.status_code == 200, response.content[:500]
        assert {r["status"] for r in response.json()["results"]} <= {200, 201}
    ids = {r["task"]["input"]["product"]: r["task"]["id"] for r in first.json()["results"]}
    assert {r["task"]["input"]["product"]: r["task"]["id"] for r in second.json()["results"]} == ids
    assert Task.objects.count() == 40
