"""The agent itself: start-up checks, registration, and both sides until a signal."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import signal
import socket
import sys
from collections.abc import Awaitable
from typing import Any

import httpx
import uvicorn
from starlette.applications import Starlette

from reference_agent.config import Config, ConfigError
from reference_agent.gateway import Gateway
from reference_agent.http_side import (
    IdempotentRequestHandler,
    QuietServer,
    bind_port,
    build_http_app,
)

log = logging.getLogger("reference-agent")

EXIT_CONFIG = 2  # bad configuration: one line on stderr, nothing started


class ReferenceAgent:
    """Wires configuration, registration, the HTTP side and the WebSocket side."""

    def __init__(self, config: Config) -> None:
        self.config = config
        self.skill: dict[str, Any] = {}
        self.api_key = ""
        self.gateway = Gateway(self)
        self._sock: socket.socket | None = None
        self._app: Starlette | None = None  # built once: tasks outlive an HTTP stop/start
        self._server: QuietServer | None = None
        self._http_task: asyncio.Task[None] | None = None

    def health(self) -> dict[str, Any]:
        return {
            "status": "ok",
            "agentId": self.config.agent_id,
            "skillId": self.config.skill_id,
            "gateway": "connected" if self.gateway.connected else "disconnected",
        }

    # -- platform calls ------------------------------------------------------------

    def _platform(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        url = f"{self.config.platform_url}{path}"
        try:
            return httpx.request(method, url, timeout=10.0, **kwargs)
        except httpx.TransportError as exc:
            raise ConfigError(
                f"cannot reach the platform at {self.config.platform_url} "
                f"({exc.__class__.__name__}: {exc}); is it running (make run)? Check PLATFORM_URL"
            ) from None

    def fetch_skill(self) -> dict[str, Any]:
        response = self._platform("GET", "/api/a2a/skills")
        listed = _json(response)
        if response.status_code != 200 or not isinstance(listed, list):
            raise ConfigError(
                f"{self.config.platform_url}/api/a2a/skills answered {response.status_code} "
                "without a skill list: is PLATFORM_URL the platform?"
            )
        skills = {s.get("id"): s for s in listed if isinstance(s, dict)}
        if self.config.skill_id not in skills:
            known = ", ".join(sorted(str(k) for k in skills)) or "none"
            raise ConfigError(
                f"skill {self.config.skill_id!r} is not on the platform "
                f"(known: {known}); set SKILL_ID to one of them"
            )
        return skills[self.config.skill_id]

    def register(self) -> None:
        """Register, re-using the saved key so a restart keeps the same identity."""
        saved = self._read_key()
        response = self._register(saved)
        if saved and response.status_code == 401:
            # The platform no longer knows this key (e.g. a fresh database): start afresh.
            log.warning("the saved key in %s was refused; registering anew", self.config.key_file)
            response = self._register(None)
        body = _json(response)
        if response.status_code == 409:
            raise ConfigError(
                f"agent {self.config.agent_id!r} is already registered and {self.config.key_file} "
                "holds no key for it: restore that file or choose another AGENT_ID"
            )
        if response.status_code not in (200, 201):
            error = body.get("error", {}) if isinstance(body, dict) else {}
            raise ConfigError(
                f"registration refused ({response.status_code}): "
                f"{error.get('message') or response.text[:200]}"
            )
        self.api_key = body.get("apiKey") or saved or ""
        if body.get("apiKey"):
            self._save_key(body["apiKey"])
        status = (body.get("profile") or {}).get("status", "")
        verb = "registered" if response.status_code == 201 else "re-registered"
        log.info(
            "%s as %s (key in %s) %s", verb, self.config.agent_id, self.config.key_file, status
        )

    def _register(self, key: str | None) -> httpx.Response:
        skill = self.skill
        payload = {
            "agentId": self.config.agent_id,
            "name": self.config.agent_name,
            "description": f"Reference agent for {skill['id']}",
            "skillIds": [skill["id"]],
            "a2aEndpoint": self.config.public_url,
            "domain": self.config.domain or skill.get("domain", ""),
            "subdomain": self.config.subdomain or skill.get("subdomain", ""),
            "version": "1.0.0",
            "metadata": {"implementation": "scripts/a2a_server_reference.py"},
        }
        if payload["a2aEndpoint"] is None:
            del payload["a2aEndpoint"]
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        if self.config.registration_token:
            headers["X-Registration-Token"] = self.config.registration_token
        return self._platform("POST", "/api/agent-profiles/register", json=payload, headers=headers)

    def _read_key(self) -> str | None:
        try:
            data = json.loads(self.config.key_file.read_text())
        except (OSError, ValueError):
            return None
        same = data.get("agentId") == self.config.agent_id
        same = same and data.get("platformUrl") == self.config.platform_url
        return data.get("apiKey") if same else None

    def _save_key(self, key: str) -> None:
        path = self.config.key_file
        path.parent.mkdir(parents=True, exist_ok=True)
        record = {
            "agentId": self.config.agent_id,
            "platformUrl": self.config.platform_url,
            "apiKey": key,
        }
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)  # a secret: owner only
        with os.fdopen(fd, "w") as fh:
            json.dump(record, fh)

    # -- the HTTP side -------------------------------------------------------------

    def http_handler(self) -> IdempotentRequestHandler | None:
        """The HTTP side's request handler (its tasks), once that side was built."""
        return self._app.state.handler if self._app is not None else None

    def start_http(self) -> None:
        if self._http_task is not None:
            return
        sock = self._sock or bind_port(self.config.a2a_host, self.config.a2a_port)
        self._sock = None
        self._app = self._app or build_http_app(self)
        config = uvicorn.Config(self._app, log_level="warning", lifespan="off")
        self._server = QuietServer(config)
        self._http_task = asyncio.create_task(self._server.serve(sockets=[sock]))
        self._http_task.add_done_callback(lambda _t: sock.close())
        log.info("A2A HTTP+JSON on http://%s:%d", self.config.a2a_host, self.config.a2a_port)

    async def stop_http(self) -> None:
        if self._server is None or self._http_task is None:
            return
        self._server.should_exit = True
        await self._http_task
        self._server, self._http_task = None, None
        log.info("A2A HTTP side stopped: the platform will fall back to the WebSocket")

    async def toggle_http(self) -> None:
        if self._http_task is None:
            self.start_http()
        else:
            await self.stop_http()

    # -- lifecycle -----------------------------------------------------------------

    def prepare(self) -> None:
        """Everything that can fail on bad configuration, before serving anything."""
        if self.config.http_enabled:
            self._sock = bind_port(self.config.a2a_host, self.config.a2a_port)
        self.skill = self.fetch_skill()
        self.register()

    async def serve(self) -> None:
        loop = asyncio.get_running_loop()
        stop = asyncio.Event()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        loop.add_signal_handler(signal.SIGUSR1, lambda: _spawn(self.toggle_http()))
        if self.config.http_enabled:
            self.start_http()
        gateway = (
            asyncio.create_task(self.gateway.run_forever()) if self.config.gateway_enabled else None
        )
        log.info(
            "reference agent %s ready (skill %s, pid %d: kill -USR1 %d stops/starts HTTP)",
            self.config.agent_id,
            self.config.skill_id,
            os.getpid(),
            os.getpid(),
        )
        await stop.wait()
        log.info("shutting down")
        if gateway is not None:
            gateway.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await gateway
        await self.stop_http()


_background: set[asyncio.Task[Any]] = set()


def _spawn(coro: Awaitable[Any]) -> None:
    task = asyncio.ensure_future(coro)
    _background.add(task)
    task.add_done_callback(_background.discard)


def _json(response: httpx.Response) -> Any:
    try:
        return response.json()
    except ValueError:
        return {}


def main(env: dict[str, str] | None = None) -> int:
    """Run the agent until SIGINT/SIGTERM; 2 on bad configuration."""
    env = dict(os.environ if env is None else env)
    try:
        config = Config.from_env(env)  # first: it checks LOG_LEVEL too
        logging.basicConfig(
            level=config.log_level,
            format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        )
        # One line per request is noise here; the agent logs what matters itself.
        logging.getLogger("httpx").setLevel(logging.WARNING)
        agent = ReferenceAgent(config)
        agent.prepare()
    except ConfigError as exc:
        line = " ".join(str(exc).split())  # one line, whatever the cause
        print(f"a2a_server_reference: error: {line}", file=sys.stderr)
        return EXIT_CONFIG
    asyncio.run(agent.serve())
    return 0
