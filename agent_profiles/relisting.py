"""The hook that tells dispatch an agent's "no listing" mark was cleared.

The registry clears the mark (:func:`agent_profiles.health.listing_again`), but the
cursor that follows the agent's tasks by listing is dispatch's (``a2a``, above this app):
its tasks already in flight would otherwise wait for the next send before anything lists
them. So dispatch registers its handler at start (:func:`register_listing_again`), as it
does the recovery handler of :mod:`agent_profiles.health`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

logger = logging.getLogger(__name__)

_on_listing_again: Callable[[str], Any] | None = None


def register_listing_again(handler: Callable[[str], Any]) -> None:
    """Called by the ``a2a`` app at start with the agent id's handler."""
    global _on_listing_again
    _on_listing_again = handler


def announce_listing_again(agent_id: str) -> None:
    """Tell the registered handler the agent's mark was cleared. Never raises: a
    registration or a card refresh must not fail for it (the agent's tasks are still
    polled, as the safety net)."""
    if _on_listing_again is None:
        return
    try:
        _on_listing_again(agent_id)
    except Exception:
        logger.exception(
            "agent %s: could not start listing its tasks in flight again",
            agent_id,
            extra={"agent_id": agent_id},
        )
