"""Bearer authentication shared by the REST API, the A2A face and the gateway.

``Authorization: Bearer usr_…`` authenticates a platform user (``manage.py apitoken``);
``Authorization: Bearer a2a_…`` authenticates an agent by its API key.
"""

from __future__ import annotations

from typing import Any

from rest_framework import authentication, exceptions
from rest_framework.request import Request

from agent_profiles.models import AgentProfile, ApiKey, UserToken


class AgentPrincipal:
    """``request.user`` for a caller authenticated by an agent API key."""

    is_authenticated = True
    is_anonymous = False
    is_staff = False
    is_superuser = False
    is_active = True
    pk = None
    id = None

    def __init__(self, agent: AgentProfile) -> None:
        self.agent = agent

    def __str__(self) -> str:
        return f"agent:{self.agent.pk}"


def bearer_token(header: str | None) -> str | None:
    """The token in an ``Authorization: Bearer <token>`` header value, if any."""
    if not header:
        return None
    scheme, _, token = header.strip().partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        return None
    return token.strip()


def authenticate_bearer(raw: str) -> Any | None:
    """A user (``usr_`` token) or an :class:`AgentPrincipal` (``a2a_`` key), or None."""
    if raw.startswith("usr_"):
        return UserToken.authenticate(raw)
    if raw.startswith("a2a_"):
        agent = ApiKey.authenticate(raw)
        return AgentPrincipal(agent) if agent is not None else None
    return None


class BearerTokenAuthentication(authentication.BaseAuthentication):
    """DRF authentication for ``Authorization: Bearer`` user tokens and agent keys."""

    keyword = "Bearer"

    def authenticate(self, request: Request) -> tuple[Any, str] | None:
        raw = bearer_token(request.META.get("HTTP_AUTHORIZATION"))
        if raw is None:
            return None
        principal = authenticate_bearer(raw)
        if principal is None:
            raise exceptions.AuthenticationFailed("Invalid or revoked API token.")
        return principal, raw

    def authenticate_header(self, request: Request) -> str:
        return self.keyword
