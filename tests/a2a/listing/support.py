"""Helpers of the listing tests: start a task at the peer, run the sweep's listing step."""

from __future__ import annotations

from typing import Any

from django.utils import timezone

from a2a import agent_listing, creation
from a2a.listing_models import AgentListing
from a2a.models import Task
from a2a.worker import process_task


def start(user: Any, behaviour: str = "working", **extra: Any) -> Task:
    task = creation.create_task(
        skill_id="ce-review", input={"product": "lamp", "behaviour": behaviour, **extra}, user=user
    )
    process_task(task.pk)
    task.refresh_from_db()
    return task


def listed_now(agent_id: str = "agent-one") -> int:
    """Make the agent's listing due and run the sweep's listing step."""
    AgentListing.objects.filter(pk=agent_id).update(next_at=timezone.now())
    return agent_listing.list_due()
