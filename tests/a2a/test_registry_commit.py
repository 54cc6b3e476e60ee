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
