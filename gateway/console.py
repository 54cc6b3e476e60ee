"""The gateway's part of the admin console: which agents are reachable, and the tasks
waiting offline for their agent. Registered from ``gateway/admin.py``."""

from __future__ import annotations

from typing import Any

from django.db.models import Count, Min
from django.http import HttpRequest
from django.template.loader import render_to_string
from django.urls import reverse
from django.utils import timezone

from agent_profiles.models import AgentProfile, AgentStatus, HealthStatus
from gateway import presence
from gateway.models import OfflineTask, Presence

# Who may see the dashboard's panel: it names agents (their pages) and the offline queue.
DASHBOARD_PERMISSIONS = ("agent_profiles.view_agentprofile", "gateway.view_offlinetask")
# An agent page's panel: its gateway connections and its offline queue.
AGENT_PANEL_PERMISSIONS = ("gateway.view_presence", "gateway.view_offlinetask")


def agents_stats() -> dict[str, Any]:
    """Active agents: on the gateway now, unhealthy, and unreachable (neither on the
    gateway nor known healthy over HTTP), with the offline tasks queued for them."""
    active = AgentProfile.objects.filter(status=AgentStatus.ACTIVE)
    online = presence.online_agent_ids()
    health = {
        pk: HealthStatus.UNHEALTHY if last_call_ok is False else status
        for pk, status, last_call_ok in active.values_list("pk", "health_status", "last_call_ok")
    }  # as agent_profiles.health.health_of judges one agent
    unhealthy = sorted(a for a, h in health.items() if h == HealthStatus.UNHEALTHY)
    offline = sorted(a for a, h in health.items() if a not in online and h != HealthStatus.HEALTHY)
    queued = (
        OfflineTask.objects.values("agent_id")
        .annotate(count=Count("pk"), oldest=Min("queued_at"))
        .order_by("-count")[:10]
    )
    now = timezone.now()
    agents_url = reverse("admin:agent_profiles_agentprofile_changelist")
    return {
        "active": len(health),
        "pending": AgentProfile.objects.filter(status=AgentStatus.PENDING).count(),
        "online": len(online & set(health)),
        "unhealthy": unhealthy,
        "offline": offline,
        "queued": [
            {**row, "age": now - row["oldest"], "url": agent_change_url(row["agent_id"])}
            for row in queued
        ],
        "queued_total": OfflineTask.objects.count(),
        "agents_url": agents_url,
        "offline_url": reverse("admin:gateway_offlinetask_changelist"),
    }


def agent_change_url(agent_id: str) -> str:
    return reverse("admin:agent_profiles_agentprofile_change", args=[agent_id])


def dashboard_panel(request: HttpRequest) -> str:
    return render_to_string("admin/gateway/dashboard.html", agents_stats(), request=request)


def agent_panel(request: HttpRequest, agent: Any) -> str:
    """Presence on the gateway and the offline queue of one agent."""
    connections = Presence.objects.filter(
        agent=agent, last_heartbeat_at__gte=presence.heartbeat_cutoff()
    ).order_by("connected_at")
    queued = OfflineTask.objects.filter(agent=agent)
    context = {
        "agent": agent,
        "connections": list(connections),
        "online": agent.status == AgentStatus.ACTIVE and connections.exists(),
        "queued": queued.count(),
        "oldest": queued.aggregate(oldest=Min("queued_at"))["oldest"],
        "offline_url": reverse("admin:gateway_offlinetask_changelist")
        + f"?agent__id__exact={agent.pk}",
    }
    return render_to_string("admin/gateway/agent_presence.html", context, request=request)
