"""The agent's configuration, read once from the environment and checked."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path


class ConfigError(Exception):
    """A problem the operator must fix; printed as one line, exit status 2."""


def _env_number(env: dict[str, str], name: str, default: float) -> float:
    raw = env.get(name, "")
    try:
        return float(raw) if raw else default
    except ValueError:
        raise ConfigError(f"{name} must be a number, got {raw!r}") from None


def _env_log_level(env: dict[str, str]) -> str:
    # Checked here: logging.basicConfig would raise a bare ValueError (a traceback).
    level = (env.get("LOG_LEVEL") or "INFO").strip().upper()
    if level not in logging.getLevelNamesMapping():
        names = ", ".join(
            n for n in logging.getLevelNamesMapping() if n not in {"WARN", "FATAL", "NOTSET"}
        )
        raise ConfigError(f"LOG_LEVEL must be one of {names}, got {env.get('LOG_LEVEL')!r}")
    return level


def _env_off(env: dict[str, str], name: str) -> bool:
    return env.get(name, "").strip().lower() in {"off", "0", "false", "no"}


@dataclass(frozen=True)
class Config:
    """Everything the agent reads from its environment, checked once at start."""

    platform_url: str
    agent_id: str
    agent_name: str
    skill_id: str
    domain: str
    subdomain: str
    a2a_host: str
    a2a_port: int
    public_url: str | None  # None: register without an endpoint (WebSocket only)
    key_file: Path
    registration_token: str
    http_enabled: bool
    gateway_enabled: bool
    ping_interval: float
    reconnect_max: float
    log_level: str = "INFO"

    @classmethod
    def from_env(cls, env: dict[str, str]) -> Config:
        agent_id = env.get("AGENT_ID") or "reference-agent"
        port = int(_env_number(env, "A2A_PORT", 3001))
        if not 0 < port < 65536:
            raise ConfigError(f"A2A_PORT must be a TCP port (1-65535), got {port}")
        host = env.get("A2A_HOST") or "127.0.0.1"
        public = env.get("A2A_PUBLIC_URL") or f"http://{host}:{port}"
        platform_url = (env.get("PLATFORM_URL") or "http://127.0.0.1:8000").rstrip("/")
        if not platform_url.startswith(("http://", "https://")):
            raise ConfigError(f"PLATFORM_URL must be an http(s) URL, got {platform_url!r}")
        return cls(
            platform_url=platform_url,
            agent_id=agent_id,
            agent_name=env.get("AGENT_NAME") or "Reference agent",
            skill_id=env.get("SKILL_ID") or "ce-certification-review-v1",
            domain=env.get("DOMAIN", ""),
            subdomain=env.get("SUBDOMAIN", ""),
            a2a_host=host,
            a2a_port=port,
            public_url=None if public.lower() == "none" else public.rstrip("/"),
            key_file=Path(env.get("AGENT_KEY_FILE") or f".agent-keys/{agent_id}.json"),
            registration_token=env.get("REGISTRATION_TOKEN", ""),
            http_enabled=not _env_off(env, "A2A_HTTP"),
            gateway_enabled=not _env_off(env, "GATEWAY"),
            ping_interval=_env_number(env, "WS_PING_INTERVAL", 20.0),
            reconnect_max=_env_number(env, "RECONNECT_MAX", 30.0),
            log_level=_env_log_level(env),
        )

    @property
    def gateway_url(self) -> str:
        scheme, rest = self.platform_url.split("://", 1)
        return f"{'wss' if scheme == 'https' else 'ws'}://{rest}/ws/agent-gateway/"
