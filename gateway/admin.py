"""Admin for the gateway: live connections, deliveries, and offline tasks per agent (with
their age, requeue and cancel). Also adds an "online" column to the agent list."""

from __future__ import annotations

import time
from typing import Any

from django.contrib import admin, messages
from django.contrib.auth import get_permission_codename
from django.core.exceptions import PermissionDenied
from django.db.models import F, Model, QuerySet
from django.http import HttpRequest, HttpResponse
from django.utils import timezone

from a2a.admin_actions import refusal_message
from a2a.models import Task
from agent_profiles.models import AgentProfile
from gateway import console as gateway_console
from gateway import offline, presence
from gateway.models import Delivery, OfflineTask, Presence
from platform_site import console
from platform_site.errors import PlatformError

_online_cache: tuple[float, set[str]] = (0.0, set())


def _online_ids() -> set[str]:
    """Online agent ids, cached a second so a list page costs one query, not one per row."""
    global _online_cache
    at, ids = _online_cache
    if time.monotonic() - at > 1.0:
        ids = presence.online_agent_ids()
        _online_cache = (time.monotonic(), ids)
    return ids


@admin.display(description="gateway", boolean=True)
def gateway_online(agent: AgentProfile) -> bool:
    """Whether the agent holds a live gateway connection (for the agent list)."""
    return agent.pk in _online_ids()


def _add_online_column() -> None:
    agent_admin = admin.site._registry.get(AgentProfile)
    if agent_admin is not None and gateway_online not in agent_admin.list_display:
        agent_admin.list_display = (*agent_admin.list_display, gateway_online)


_add_online_column()
console.add_dashboard_panel(
    "gateway",
    gateway_console.dashboard_panel,
    order=30,
    permissions=gateway_console.DASHBOARD_PERMISSIONS,
)
console.add_agent_panel(
    "gateway",
    gateway_console.agent_panel,
    order=30,
    permissions=gateway_console.AGENT_PANEL_PERMISSIONS,
)


def _age(since: Any) -> str:
    seconds = int((timezone.now() - since).total_seconds())
    hours, rest = divmod(seconds, 3600)
    return f"{hours}h {rest // 60:02d}m" if hours else f"{rest // 60}m {rest % 60:02d}s"


def may(request: HttpRequest, action: str, model: type[Model]) -> bool:
    """Whether the user holds ``action`` ("change", ...) permission on ``model``."""
    opts = model._meta
    return request.user.has_perm(f"{opts.app_label}.{get_permission_codename(action, opts)}")


class ViewOnly(admin.ModelAdmin):
    """Rows the gateway writes: shown, never edited (no Save buttons) nor deleted. Their
    actions run for users holding the model's change permission (``has_change_permission``
    is always False here, so it cannot be what the actions check)."""

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    # No delete here: a deleted delivery strands its task, left waiting on the offline
    # transport, which the deadline sweep leaves to the delivery's own expiry, gone with
    # the row. Requeue and Cancel are the ways out. The delete permission itself stays:
    # deleting a task, or an agent (its connections), takes its rows with it, and
    # Django refuses those deletes to a user who may not delete the rows they cascade to.

    def get_actions(self, request: HttpRequest) -> dict[str, Any]:
        """The list's actions, without Django's "Delete selected"."""
        actions = super().get_actions(request)
        actions.pop("delete_selected", None)
        return actions

    def delete_view(
        self, request: HttpRequest, object_id: str, extra_context: dict[str, Any] | None = None
    ) -> HttpResponse:
        """A row's delete page: refused (403), as its page offers no Delete link."""
        raise PermissionDenied

    def change_view(
        self,
        request: HttpRequest,
        object_id: str,
        form_url: str = "",
        extra_context: dict[str, Any] | None = None,
    ) -> HttpResponse:
        """A row's page, without the Delete link."""
        extra_context = {**(extra_context or {}), "show_delete": False}
        return super().change_view(request, object_id, form_url, extra_context)

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_operate_permission(self, request: HttpRequest) -> bool:
        """Whether the user may run this list's actions: the model's change permission."""
        return may(request, "change", self.model)


@admin.register(Presence)
class PresenceAdmin(ViewOnly):
    list_display = (
        "agent",
        "server_id",
        "remote_addr",
        "connected_at",
        "last_heartbeat_at",
        "live",
    )
    list_filter = ("server_id",)
    search_fields = ("agent__id", "channel_name")
    readonly_fields = [f.name for f in Presence._meta.fields]

    @admin.display(boolean=True)
    def live(self, obj: Presence) -> bool:
        return obj.last_heartbeat_at >= presence.heartbeat_cutoff()


@admin.display(description="task", ordering="task")
def task_column(row: Delivery) -> str:
    """The task's id, on the row itself: showing the task (its ``str``) joined each row's
    whole task, artifacts and all (megabytes each), for an id and a state."""
    return str(row.task_id)


@admin.display(description="agent", ordering="agent")
def agent_column(row: Delivery) -> str:
    """The agent's id, on the row itself: joining the agent read its card for nothing."""
    return row.agent_id


@admin.register(Delivery)
class DeliveryAdmin(ViewOnly):
    list_display = (
        "id",
        "kind",
        task_column,
        agent_column,
        "status",
        "attempts",
        "created_at",
        "acked_at",
    )
    list_filter = ("status", "kind")
    search_fields = ("id", "task__id", "agent__id")
    list_select_related = False  # no join: see task_column
    readonly_fields = [f.name for f in Delivery._meta.fields]


@admin.register(OfflineTask)
class OfflineTaskAdmin(ViewOnly):
    """Tasks waiting for their agent to connect, oldest first; requeue or cancel them."""

    list_display = (task_column, agent_column, "skill", "age", "expires_at", "reason")
    list_filter = ("agent",)
    search_fields = ("task__id", "agent__id")
    list_select_related = False  # the skill's id is joined alone: see get_queryset
    readonly_fields = [f.name for f in Delivery._meta.fields]
    actions = ["requeue", "cancel"]
    ordering = ("created_at",)

    @admin.display(description="age", ordering="queued_at")
    def age(self, obj: OfflineTask) -> str:
        return _age(obj.queued_at)

    def get_queryset(self, request: HttpRequest) -> QuerySet[OfflineTask]:
        # The task's skill id through the join, not the task: a whole task read per row
        # (artifacts and all) for one column made a page of them hold hundreds of MB.
        return super().get_queryset(request).annotate(skill_id=F("task__skill"))

    @admin.display(description="skill", ordering="skill_id")
    def skill(self, obj: OfflineTask) -> str:
        return obj.skill_id  # type: ignore[attr-defined]

    @admin.action(
        description="Requeue: restart the expiry clock and push again now",
        permissions=["operate"],
    )
    def requeue(self, request: HttpRequest, queryset: QuerySet[OfflineTask]) -> None:
        done = sum(offline.requeue_offline(row) for row in queryset)
        self.message_user(request, f"Requeued {done} offline task(s).", messages.SUCCESS)

    @admin.action(description="Cancel the selected tasks", permissions=["cancel"])
    def cancel(self, request: HttpRequest, queryset: QuerySet[OfflineTask]) -> None:
        # A task its agent finished between the list's read and its cancel is refused
        # (409): noted, and the others still canceled (it answered a 500, the rest undone).
        done, refused = 0, []
        for row in queryset:
            try:
                done += offline.cancel_offline(row, by=request.user)
            except PlatformError as exc:
                refused.append(exc.message)
        self.message_user(request, f"Canceled {done} task(s).", messages.SUCCESS)
        if refused:
            message = refusal_message("Canceled", len(refused), refused)
            self.message_user(request, message, messages.WARNING)

    def has_cancel_permission(self, request: HttpRequest) -> bool:
        """Canceling cancels the platform task too: it also takes the permission to change
        tasks, which the task page's Cancel button and the task list's action require."""
        return self.has_operate_permission(request) and may(request, "change", Task)
