"""The admin console's panels: each app contributes what it knows.

The dashboard (admin index) and an agent's page show panels from several apps, but imports
point one way (gateway → a2a → agent_profiles → platform_site): so the higher apps register
their panels here at start (in their ``admin.py``), and the templates render whatever is
registered. A panel is a function returning HTML (usually ``render_to_string``).

A panel is registered with the permissions of what it shows (``"a2a.view_task"``, ...)
and rendered only for a user holding all of them: staff who get 403 on a list must not
read its rows' figures on the dashboard.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, NamedTuple

from django.http import HttpRequest
from django.utils.safestring import SafeString, mark_safe

DashboardPanel = Callable[[HttpRequest], str]
AgentPanel = Callable[[HttpRequest, Any], str]


class Panel(NamedTuple):
    """A registered panel: its place, the function rendering it, who may see it."""

    order: int
    render: Callable[..., str]
    permissions: tuple[str, ...]


_dashboard: dict[str, Panel] = {}
_agent: dict[str, Panel] = {}


def add_dashboard_panel(
    name: str, panel: DashboardPanel, order: int = 50, permissions: Iterable[str] = ()
) -> None:
    """Show ``panel`` on the admin index (lower ``order`` first) to users holding every
    one of ``permissions`` (``"app_label.codename"``); re-adding replaces."""
    _dashboard[name] = Panel(order, panel, tuple(permissions))


def add_agent_panel(
    name: str, panel: AgentPanel, order: int = 50, permissions: Iterable[str] = ()
) -> None:
    """Show ``panel(request, agent)`` on an agent's admin page, to users holding every one
    of ``permissions``."""
    _agent[name] = Panel(order, panel, tuple(permissions))


def _visible(request: HttpRequest, panels: dict[str, Panel]) -> list[Panel]:
    """The panels the request's user may see, in their order (none are even rendered for
    the others: a panel's queries cost)."""
    user = request.user
    shown = [panel for panel in panels.values() if user.has_perms(panel.permissions)]
    return sorted(shown, key=lambda panel: panel.order)


def dashboard_html(request: HttpRequest) -> SafeString:
    """The dashboard panels the user may see, rendered."""
    panels = _visible(request, _dashboard)
    return mark_safe("".join(panel.render(request) for panel in panels))  # rendered templates


def agent_html(request: HttpRequest, agent: Any) -> SafeString:
    """The agent page's panels the user may see, rendered for ``agent``."""
    panels = _visible(request, _agent)
    return mark_safe("".join(panel.render(request, agent) for panel in panels))
