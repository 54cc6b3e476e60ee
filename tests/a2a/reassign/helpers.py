"""What the reassign race tests share: the old agent's transport that records what it is
told, a move made between a person's read and its write, and the person's stale copy."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from rest_framework.test import APIClient

from a2a import agent_updates
from a2a import reassign as reassign_module
from a2a.models import Task
from a2a.transports.base import AgentReply


class OldAgent:
    """The old agent's A2A transport: records the cancels it is told, and what the row
    was when told; ``then`` runs as the agent answers (its report of the cancel)."""

    def __init__(self, task: Task, then: Callable[[str], None] | None = None) -> None:
        self.task, self.then = task, then
        self.told: list[tuple[str, str, str]] = []

    def cancel(self, remote_id: str, timeout: float = 0.0) -> Any:
        row = Task.objects.get(pk=self.task.pk)
        self.told.append((remote_id, row.agent_id, row.state))
        if self.then is not None:
            self.then(remote_id)
        return AgentReply(task={"id": remote_id, "status": {"state": "TASK_STATE_CANCELED"}})


def old_agent(monkeypatch: Any, agent: OldAgent) -> OldAgent:
    monkeypatch.setattr(reassign_module.agent_registry, "target_for", lambda a: None)
    monkeypatch.setattr(reassign_module.transports, "transport_for", lambda target: agent)
    return agent


def meanwhile(monkeypatch: Any, move: Callable[[Task], Any]) -> None:
    """Between the reassign's read of the task (the view's) and its write, the platform
    moves it: done as the new agent is chosen (its queries are that window)."""
    choose = reassign_module._new_agent

    def chosen(task: Task, agent_id: str | None) -> Any:
        picked = choose(task, agent_id)
        move(Task.objects.get(pk=task.pk))  # another process's copy of the row
        return picked

    monkeypatch.setattr(reassign_module, "_new_agent", chosen)


def reassign(api: APIClient, task: Task) -> Any:
    return api.post(f"/api/tasks/{task.pk}/reassign", {"agentId": "agent-two"}, format="json")


def accepted(row: Task, remote_id: str = "r-1") -> Task:
    """The worker's send was answered: the agent's task (``remote_id``), still SUBMITTED."""
    return agent_updates.apply_agent_update(
        row, status={"state": "TASK_STATE_SUBMITTED"}, remote={"id": remote_id}, via="a2a"
    )


def stale(task: Task) -> Task:
    """A person's copy of the task (a page, the API's read), before what comes next."""
    return Task.objects.select_related("agent", "skill").get(pk=task.pk)
