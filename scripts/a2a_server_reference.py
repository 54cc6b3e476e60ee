#!/usr/bin/env python3
"""The reference agent: a complete A2A 1.0 agent for the platform, meant to be copied.

Run it next to the platform (``make run`` in another terminal)::

    .venv/bin/python scripts/a2a_server_reference.py

On start it:

1. reads the skill definitions (``GET /api/a2a/skills``) and checks that ``SKILL_ID`` is
   one of them;
2. registers (``POST /api/agent-profiles/register``) and keeps its API key in
   ``AGENT_KEY_FILE``, so a restart re-registers as the same agent with the same key;
3. serves A2A 1.0 over HTTP+JSON with the official ``a2a-sdk`` server (``POST
   /message:send``, ``GET /tasks/{id}``, ``POST /tasks/{id}:cancel``, its agent card at
   ``/.well-known/agent-card.json``) and ``GET /health``;
4. holds a WebSocket open to the platform's gateway (``/ws/agent-gateway/``), reconnecting
   with backoff, so the platform can still reach it when its HTTP side is down or absent.

Both transports run the same skill handler, ``handle_task`` in
``scripts/reference_agent/skill.py``. To build your own agent, replace that one function;
everything else is plumbing you can keep.

Configuration (environment variables):

===================  =====================================================================
PLATFORM_URL         the platform's base URL (default ``http://127.0.0.1:8000``)
AGENT_ID             this agent's id, a slug (default ``reference-agent``)
AGENT_NAME           display name (default ``Reference agent``)
SKILL_ID             the skill it offers (default ``ce-certification-review-v1``)
DOMAIN, SUBDOMAIN    registry matching hints (default: the skill's own)
A2A_HOST, A2A_PORT   where the HTTP side listens (default ``127.0.0.1``, ``3001``)
A2A_PUBLIC_URL       the A2A URL it registers (default ``http://A2A_HOST:A2A_PORT``);
                     ``none`` registers no endpoint: the agent then works over the
                     WebSocket only
A2A_HTTP             ``off`` starts without the HTTP side (the platform's calls fail and it
                     falls back to the WebSocket); ``kill -USR1 <pid>`` toggles it live
AGENT_KEY_FILE       where the API key is kept (default ``.agent-keys/<AGENT_ID>.json``)
REGISTRATION_TOKEN   sent as ``X-Registration-Token`` when the platform asks for one
GATEWAY              ``off`` to run without the WebSocket
WS_PING_INTERVAL     seconds between heartbeat pings (default 20)
RECONNECT_MAX        longest wait between reconnect attempts, seconds (default 30)
LOG_LEVEL            ``INFO`` (default), ``DEBUG``, ...
===================  =====================================================================

Bad configuration (unknown skill, platform unreachable, port in use, ...) ends the process
with one clear line on stderr and exit status 2. SIGINT / SIGTERM stop it cleanly.
"""

from __future__ import annotations

import sys
from pathlib import Path

# The agent lives in the small package next to this file (scripts/reference_agent/).
sys.path.insert(0, str(Path(__file__).resolve().parent))

from reference_agent.agent import main

if __name__ == "__main__":
    sys.exit(main())
