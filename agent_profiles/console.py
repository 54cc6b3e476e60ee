"""The registry's part of an agent's console page: status, health, the card it serves
and whether credentials are configured (never their values)."""

from __future__ import annotations

import json
from typing import Any

from django.http import HttpRequest
from django.template.loader import render_to_string
from django.urls import reverse

from agent_profiles.health import health_of
from agent_profiles.interfaces import interface_of
from agent_profiles.models import AgentCard, AgentProfile


def scheme_summary(schemes: dict[str, Any]) -> list[dict[str, str]]:
    """Security schemes by name with their type (the card's shapes, 1.0 or 0.3)."""
    rows = []
    for name, scheme in (schemes or {}).items():
        kind = "?"
        if isinstance(scheme, dict):
            # 1.0 wraps each scheme in a oneof ({"httpAuthSecurityScheme": {...}}); 0.3
            # has a "type".
            kind = str(scheme.get("type") or next(iter(scheme), "?"))
            inner = scheme.get(kind) if isinstance(scheme.get(kind), dict) else scheme
            detail = inner.get("scheme") or inner.get("in") or inner.get("name") or ""
            kind = f"{kind.removesuffix('SecurityScheme')} {detail}".strip()
        rows.append({"name": str(name), "kind": kind})
    return rows


def agent_panel(request: HttpRequest, agent: AgentProfile) -> str:
    card = AgentCard.objects.filter(agent=agent).first()
    context = {
        "agent": agent,
        "card": card,
        "health": health_of(agent),
        "calling": interface_of(agent),
        "schemes": scheme_summary(agent.security_schemes),
        "requirements": json.dumps(agent.security_requirements)
        if agent.security_requirements
        else "",
        "credentials_configured": bool(agent.auth_encrypted),
        "rotate_url": reverse("admin:agent_profiles_agentprofile_rotate", args=[agent.pk]),
        # Rotating changes the agent: a view-only user's button would answer 403.
        "can_rotate": request.user.has_perm("agent_profiles.change_agentprofile"),
    }
    return render_to_string("admin/agent_profiles/agent_panel.html", context, request=request)
