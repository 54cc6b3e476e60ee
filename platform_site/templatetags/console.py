"""Template helpers of the admin console: panels, state badges, durations, JSON."""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from typing import Any

from django import template
from django.utils.html import format_html
from django.utils.safestring import SafeString

from platform_site import console

register = template.Library()


@register.simple_tag(takes_context=True)
def dashboard_panels(context: dict[str, Any]) -> SafeString:
    return console.dashboard_html(context["request"])


@register.simple_tag(takes_context=True)
def agent_panels(context: dict[str, Any], agent: Any) -> SafeString:
    return console.agent_html(context["request"], agent)


def state_slug(state: str) -> str:
    return str(state).removeprefix("TASK_STATE_").lower()


@register.filter
def badge(state: str) -> SafeString:
    """A coloured badge for a task state (``TASK_STATE_COMPLETED`` → "completed")."""
    slug = state_slug(state)
    return format_html(
        '<span class="badge {}" title="{}">{}</span>', slug, state, slug.replace("_", " ")
    )


def human_duration(delta: timedelta | float | None) -> str:
    """``2.35 s``, ``4 m 05 s``, ``3 h 02 m``, ``2 d 4 h``."""
    if delta is None:
        return "—"
    seconds = delta.total_seconds() if isinstance(delta, timedelta) else float(delta)
    if seconds < 60:
        return f"{seconds:.2f} s"
    whole = int(seconds)
    if whole < 3600:
        return f"{whole // 60} m {whole % 60:02d} s"
    if whole < 86400:
        return f"{whole // 3600} h {whole % 3600 // 60:02d} m"
    return f"{whole // 86400} d {whole % 86400 // 3600} h"


@register.filter
def duration(value: Any) -> str:
    return human_duration(value)


@register.filter
def since(value: datetime | None, start: datetime | None) -> str:
    """``value - start`` as a duration (for "+1.20 s" after creation)."""
    if value is None or start is None:
        return "—"
    return human_duration(value - start)


@register.filter
def pretty_json(value: Any) -> SafeString:
    return format_html(
        '<pre class="json">{}</pre>', json.dumps(value, indent=2, ensure_ascii=False, default=str)
    )
