"""A registration's change reaches this process's registry cache at its commit: the cache
dropped inside the transaction was filled again, by another thread of the process reading
the old row before the commit, and served that old agent (its old endpoint) for the whole
A2A_REGISTRY_CACHE_SECONDS to the tasks created meanwhile."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from django.db import connection, transaction

from a2a import lookups
from agent_profiles.models import AgentProfile


def read_in_another_thread() -> None:
    def read() -> None:
        try:
            lookups.candidates(lookups.skill("ce-review"))
        finally:
            connection.close()

    thread = threading.Thread(target=read)
    thread.start()
    thread.join()


@pytest.mark.django_db(transaction=True)
def test_a_lookup_before_the_commit_does_not_keep_the_old_agent(
    make_skill: Any, make_agent: Any
) -> None:
    agent = make_agent(skills=[make_skill(id="ce-review")], a2a_endpoint="http://old.example")
    lookups.clear()
    with transaction.atomic():
        row = AgentProfile.objects.get(pk=agent.pk)
        row.a2a_endpoint = "http://new.example"
        row.save()
        read_in_another_thread()  # sees the committed, old row
    [cached] = lookups.candidates(lookups.skill("ce-review"))
    assert cached.a2a_endpoint == "http://new.example"


@pytest.mark.django_db(transaction=True)
def test_a_read_before_the_commit_kept_after_it_is_not_cached(
    make_skill: Any, make_agent: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The reader read the old row before the commit, and stores it after the commit's
    clear (a thread switch between its query and its put)."""
    agent = make_agent(skills=[make_skill(id="ce-review")], a2a_endpoint="http://old.example")
    lookups.clear()
    skill = lookups.skill("ce-review")
    read, go = threading.Event(), threading.Event()
    put = lookups._put

    def put_later(store: Any, *args: Any) -> Any:
        if store is lookups._candidates and threading.current_thread().name == "reader":
            read.set()
            go.wait(5)
        return put(store, *args)

    monkeypatch.setattr(lookups, "_put", put_later)

    def reader() -> None:
        try:
            lookups.candidates(skill)
        finally:
            connection.close()

    thread = threading.Thread(target=reader, name="reader")
    with transaction.atomic():
        row = AgentProfile.objects.get(pk=agent.pk)
        row.a2a_endpoint = "http://new.example"
        row.save()
        thread.start()
        assert read.wait(5)
    go.set()  # after the commit and its clear
    thread.join()
    [cached] = lookups.candidates(skill)
    assert cached.a2a_endpoint == "http://new.example"
