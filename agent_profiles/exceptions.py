"""Domain errors of the registry (the API layers turn them into wire errors)."""

from __future__ import annotations

from platform_site.errors import ValidationFailed


class NoAgentAvailable(ValidationFailed):
    """No active agent offers the skill a task asks for (400 ``no_agent``)."""

    code = "no_agent"
