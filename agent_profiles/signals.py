"""Signals the registry sends for the apps above it (which it cannot import).

Imports point gateway → a2a → agent_profiles, so the registry announces and the apps
above connect at their start (``a2a.apps``).
"""

from __future__ import annotations

from django.dispatch import Signal

# Sent after commit (sender: AgentProfile, ``agent_ids``: the agents concerned; or Skill
# after ``loadskills``, written in bulk) when agents, their keys or skills changed without a
# model signal: a bulk ``update()`` sends no ``post_save``
# (the admin's approve/disable, a key revoked or rotated). What this process caches of
# them must be read again: the registry cache of task creation, the A2A face's tokens.
registry_changed = Signal()
