"""What dispatch asks of (and tells) the registry about an agent, in one place.

* :func:`target_for` — how to call the agent (``agent_profiles.interfaces.call_target``),
  with the card read first if it was not reachable at registration (``ensure_card``);
* :func:`mark_no_polling` — the agent does not answer ``GetTask``;
* :func:`record_call_outcome` — feeds the agent's health (an ``agent_auth_failed`` shows
  there as a credential problem).

The registry's own functions do the work; until a build of the registry has them, the
calls are no-ops here (and only here).
"""

from __future__ import annotations

import importlib
import logging
from collections.abc import Callable
from typing import Any

from agent_profiles.interfaces import CallTarget, call_target
from agent_profiles.models import AgentProfile

log = logging.getLogger(__name__)

_MODULES = ("agent_profiles.services", "agent_profiles.cards", "agent_profiles.health")


def _registry(name: str) -> Callable[..., Any] | None:
    for module_name in _MODULES:
        try:
            module = importlib.import_module(module_name)
        except ImportError:
            continue
        function = getattr(module, name, None)
        if callable(function):
            return function
    return None


def target_for(profile: AgentProfile, *, first_call: bool = False) -> CallTarget:
    """How to call ``profile``; on a first call the card is read if it is still missing."""
    if first_call:
        ensure = _registry("ensure_card")
        if ensure is not None:
            try:
                ensure(profile)
            except Exception:  # an unreadable card must not stop the call: defaults apply
                log.warning("agent %s: could not read its card", profile.pk, exc_info=True)
    return call_target(profile)


def mark_no_polling(profile: AgentProfile, reason: str) -> None:
    """Record that the agent cannot be polled (its tasks are followed another way)."""
    mark = _registry("mark_no_polling")
    if mark is not None:
        mark(profile, reason)


def record_call_outcome(
    profile: AgentProfile, *, ok: bool, code: str = "", message: str = ""
) -> None:
    """Tell the registry how a call to the agent went (its health)."""
    record = _registry("record_call_outcome")
    if record is None:
        return
    try:
        record(profile, ok=ok, code=code, message=message)
    except Exception:  # health bookkeeping must never break dispatch
        log.warning("agent %s: could not record a call outcome", profile.pk, exc_info=True)
