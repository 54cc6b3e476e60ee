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
    ``auth_unreadable``: the agent has a stored credential that cannot be decrypted (the
    key changed); dispatch then calls nothing (``credentials_unreadable``) rather than
    call without the credential the operator configured.
    ``polling`` is False once the agent was found not to answer ``GetTask``, ``listing``
    once its tasks were found not to be followed by ``ListTasks``, ``early_return`` once
    it held a send that asked it to return at once.
    """

    agent_id: str
    binding: str = HTTP_JSON
    url: str = ""
    version: str = V1_0
    tenant: str = ""
    auth: dict[str, Any] | None = field(default=None, repr=False)
    auth_unreadable: bool = False
    streaming: bool = False
    push_notifications: bool = False
    polling: bool = True
    listing: bool = True
    early_return: bool = True
    timeout_seconds: float | None = None
    poll_interval_seconds: float | None = None
    # Names of the card's securitySchemes (for messages such as agent_auth_failed).
    security_schemes: tuple[str, ...] = ()


def call_target(profile: AgentProfile) -> CallTarget:
    """The interface to call ``profile`` on.

    From its card when one was read (``profile.interface``); else the registration's
    ``protocolBinding`` / ``protocolVersion`` at ``a2aEndpoint``; else HTTP+JSON 1.0 there.
    ``target`` (the remote tenant) overrides the card interface's ``tenant``. Call
    :func:`agent_profiles.cards.ensure_card` first so a card not read yet is read.
    """
    from agent_profiles.credentials import has_credentials, read_credentials

    chosen = interface_of(profile)
    auth = read_credentials(profile)
    return CallTarget(
        agent_id=profile.id,
        binding=chosen["binding"],
        url=chosen["url"],
        version=chosen["version"],
        tenant=chosen["tenant"],
        auth=auth,
        auth_unreadable=auth is None and has_credentials(profile),
        streaming=profile.streaming,
        push_notifications=profile.push_notifications,
        polling=profile.polling,
        listing=profile.listing,
        early_return=profile.early_return,
        timeout_seconds=profile.timeout,
        poll_interval_seconds=profile.poll_interval,
        security_schemes=tuple(sorted(profile.security_schemes or {})),
    )


def interface_of(profile: AgentProfile) -> dict[str, str]:
    """The interface :func:`call_target` uses: ``binding``, ``version``, ``url``, ``tenant``
    and ``source`` (``card``, ``registration`` or ``default``)."""
    card = profile.interface or {}
    if card.get("url"):
        return {
            "binding": card["binding"],
            "version": card["version"],
            "url": card["url"],
            "tenant": profile.target or card.get("tenant", ""),
            "source": "card",
        }
    stated = bool(profile.protocol_binding or profile.protocol_version)
    return {
        "binding": profile.protocol_binding or HTTP_JSON,
        "version": profile.protocol_version or V1_0,
        "url": profile.a2a_endpoint,
        "tenant": profile.target,
        "source": "registration" if stated else "default",
    }


def takes_json(profile: AgentProfile, skill_id: str) -> bool:
    """Whether ``profile``'s card admits JSON data as input for ``skill_id`` (its skill's
    own input modes, else the card's defaults; yes when the card names none)."""
    modes = profile.json_input or {}
    return bool(modes.get(skill_id, modes.get("", True)))
