"""Transports: one way to reach an agent = one transport.

* :func:`transport_for` — the A2A transport for an agent's
  :class:`~agent_profiles.interfaces.CallTarget` (binding and version):
  :class:`~a2a.transports.rest.RestTransport` (HTTP+JSON 1.0 and 0.3) or
  :class:`~a2a.transports.jsonrpc.JsonRpcTransport` (JSON-RPC 1.0 and 0.3).
* :func:`gateway` — the gateway transport (WebSocket, or an offline task), which the
  ``gateway`` app registers at start (:func:`register_gateway`): ``a2a`` never imports it.

Everything comes back in A2A 1.0 shapes as :class:`~a2a.transports.base.AgentReply`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

from django.core.exceptions import ImproperlyConfigured

from a2a.transports.base import AgentTransport
from a2a.transports.jsonrpc import JsonRpcTransport
from a2a.transports.rest import RestTransport
from agent_profiles.interfaces import BINDINGS, JSONRPC, VERSIONS, CallTarget

if TYPE_CHECKING:
    from a2a.exceptions import A2ACallError
    from a2a.models import Task

__all__ = ["GatewayTransport", "gateway", "register_gateway", "transport_for"]


def transport_for(target: CallTarget, *, output_modes: list[str] | None = None) -> AgentTransport:
    """The transport that speaks ``target``'s binding and version; its sends pass on
    ``output_modes`` (the media types the task's caller accepts), when given."""
    if target.binding not in BINDINGS or target.version not in VERSIONS:
        from a2a.exceptions import A2APermanentError

        raise A2APermanentError(
            f"Agent '{target.agent_id}' is to be called over {target.binding} "
            f"{target.version}, which the platform does not speak.",
            code="unsupported_interface",
        )
    if target.binding == JSONRPC:
        return JsonRpcTransport(target, output_modes=output_modes)
    return RestTransport(target, output_modes=output_modes)


class GatewayTransport(Protocol):
    """The gateway as the dispatcher sees it (implemented by ``gateway.fallback``)."""

    def takes_over_now(self, task: Task, error: A2ACallError) -> bool:
        """Whether a failed send goes to the gateway without further HTTP retries."""

    def may_take_over(self, error: A2ACallError) -> bool:
        """Whether a failed send may go to the gateway at all."""

    def hand_over(self, task: Task, error: A2ACallError | None) -> Task:
        """Give the task to the gateway (socket or offline), recording why."""

    def follow_up(self, task: Task, kind: str, message: dict[str, Any] | None) -> str:
        """Send a reply (``"message"``) or a ``"cancel"`` for a task the gateway holds."""

    def withdraw(self, task: Task, reason: str) -> bool:
        """Take back what the gateway holds for the task and never gave the agent (its
        assignment, a reply), closed with ``reason``; False, and nothing changed, when
        there is nothing to take back or part of it reached the agent."""


_gateway: GatewayTransport | None = None


def register_gateway(implementation: GatewayTransport) -> None:
    """Called by the gateway app at start."""
    global _gateway
    _gateway = implementation


def gateway() -> GatewayTransport:
    if _gateway is None:
        raise ImproperlyConfigured(
            "No gateway transport is registered: is 'gateway' in INSTALLED_APPS?"
        )
    return _gateway
