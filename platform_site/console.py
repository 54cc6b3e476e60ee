"""The admin console's panels: each app contributes what it knows.

The dashboard (admin index) and an agent's page show panels from several apps, but imports
point one way (gateway → a2a → agent_profiles → platform_site): so the higher apps register
their panels here at start (in their ``admin.py``), and the templates render whatever is
registered. A panel is a function returning HTML (usually ``render_to_string``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.http import HttpRequest
from django.utils.safestring import SafeString, mark_safe

DashboardPanel = Callable[[HttpRequest], str]
AgentPanel = Callable[[HttpRequest, Any], str]

_dashboard: dict[str, tuple[int, DashboardPanel]] = {}
_agent: dict[str, tuple[int, AgentPanel]] = {}


def add_dashboard_panel(name: str, panel: DashboardPanel, order: int = 50) -> None:
    """Show ``panel`` on the admin index (lower ``order`` first); re-adding replaces."""
    _dashboard[name] = (order, panel)


def add_agent_panel(name: str, panel: AgentPanel, order: int = 50) -> None:
    """Show ``panel(request, agent)`` on an agent's admin page."""
    _agent[name] = (order, panel)


def dashboard_html(request: HttpRequest) -> SafeString:
    panels = sorted(_dashboard.values(), key=lambda item: item[0])
    return mark_safe("".join(panel(request) for _, panel in panels))  # rendered templates


def agent_html(request: HttpRequest, agent: Any) -> SafeString:
    panels = sorted(_agent.values(), key=lambda item: item[0])
    return mark_safe("".join(panel(request, agent) for _, panel in panels))
