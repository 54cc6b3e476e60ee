"""Signal receivers keeping the gateway's rows in step with tasks and agents."""

from __future__ import annotations

import logging
from typing import Any

from django.db.models.signals import post_save
from django.dispatch import receiver

from a2a.signals import task_changed
from a2a.states import TERMINAL_STATES
from agent_profiles.models import AgentProfile
from gateway import services

log = logging.getLogger(__name__)


@receiver(task_changed, dispatch_uid="gateway.task_changed")
def withdraw_deliveries_of_finished_task(sender: Any, task_id: Any, **kwargs: Any) -> None:
    """A finished task owes its agent nothing more (a cancel already queued still goes)."""
    from a2a.models import Task

    try:
        state = Task.objects.filter(pk=task_id).values_list("state", flat=True).first()
        if state in TERMINAL_STATES:
            services.close_open_deliveries(task_id, f"task {state}")
    except Exception:  # receivers must not raise into the transition's caller
        log.exception("gateway: could not withdraw deliveries of task %s", task_id)


@receiver(post_save, sender=AgentProfile, dispatch_uid="gateway.agent_saved")
def disconnect_disabled_agent(sender: Any, instance: AgentProfile, **kwargs: Any) -> None:
    """A disabled agent loses its open connections at once (close 4403)."""
    if not instance.is_active:
        services.disconnect_agent(instance.id)
