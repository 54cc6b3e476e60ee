"""How to call an agent: the interface chosen from its card (or its registration).

This module is the seam between the registry and dispatch. The registry decides *where
and how* an agent is reached (binding, URL, protocol version, tenant, credentials,
capabilities) and stores it on the profile; dispatch (``a2a``) asks :func:`call_target`
for a :class:`CallTarget` and drives the matching transport without knowing how the
choice was made.

Bindings and versions are the A2A spellings: ``HTTP+JSON`` / ``JSONRPC`` and ``1.0`` /
``0.3``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from agent_profiles.models import AgentProfile

HTTP_JSON = "HTTP+JSON"
JSONRPC = "JSONRPC"
BINDINGS = (HTTP_JSON, JSONRPC)
V1_0 = "1.0"
V0_3 = "0.3"
VERSIONS = (V1_0, V0_3)


@dataclass(frozen=True)
class CallTarget:
    """Everything a transport needs to call one agent.

    ``auth`` is the decrypted credential in one of DESIGN.md's shapes (``bearer``,
    ``apiKey``, ``oauth2``) or None; it must never be logged or stored elsewhere.
    ``polling`` is False once the agent was found not to answer ``GetTask``.
    """

    agent_id: str
    binding: str = HTTP_JSON
    url: str = ""
    version: str = V1_0
    tenant: str = ""
    auth: dict[str, Any] | None = field(default=None, repr=False)
    streaming: bool = False
    push_notifications: bool = False
    polling: bool = True
    timeout_seconds: float | None = None
    poll_interval_seconds: float | None = None


def call_target(profile: AgentProfile) -> CallTarget:
    """The interface to call ``profile`` on (default: HTTP+JSON 1.0 at ``a2a_endpoint``)."""
    return CallTarget(
        agent_id=profile.id,
        url=profile.a2a_endpoint,
        poll_interval_seconds=profile.poll_interval,
    )
