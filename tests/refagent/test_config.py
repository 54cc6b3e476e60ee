"""The reference agent's configuration: defaults, overrides and refusals."""

from __future__ import annotations

from pathlib import Path

import pytest
from reference_agent.config import Config, ConfigError


def test_the_defaults_fit_make_run_on_one_laptop() -> None:
    config = Config.from_env({})
    assert config.platform_url == "http://127.0.0.1:8000"
    assert config.gateway_url == "ws://127.0.0.1:8000/ws/agent-gateway/"
    assert (config.agent_id, config.skill_id) == ("reference-agent", "ce-certification-review-v1")
    assert (config.a2a_host, config.a2a_port) == ("127.0.0.1", 3001)
    assert config.public_url == "http://127.0.0.1:3001"
    assert config.key_file == Path(".agent-keys/reference-agent.json")
    assert config.http_enabled
    assert config.gateway_enabled
    assert config.log_level == "INFO"


def test_it_follows_the_environment() -> None:
    config = Config.from_env(
        {
            "PLATFORM_URL": "https://agents.example.com/",
            "AGENT_ID": "acme",
            "A2A_PORT": "4000",
            "A2A_PUBLIC_URL": "https://acme.example.com/a2a/",
            "A2A_HTTP": "off",
            "GATEWAY": "false",
            "LOG_LEVEL": "debug",
        }
    )
    assert config.gateway_url == "wss://agents.example.com/ws/agent-gateway/"
    assert config.public_url == "https://acme.example.com/a2a"
    assert config.key_file == Path(".agent-keys/acme.json")
    assert not config.http_enabled
    assert not config.gateway_enabled
    assert config.log_level == "DEBUG"


def test_a_public_url_of_none_registers_no_endpoint() -> None:
    assert Config.from_env({"A2A_PUBLIC_URL": "none"}).public_url is None


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"A2A_PORT": "x"}, "A2A_PORT must be a number"),
        ({"A2A_PORT": "0"}, "A2A_PORT must be a TCP port"),
        ({"PLATFORM_URL": "127.0.0.1:8000"}, r"PLATFORM_URL must be an http\(s\) URL"),
        ({"WS_PING_INTERVAL": "often"}, "WS_PING_INTERVAL must be a number"),
        ({"LOG_LEVEL": "verbose"}, "LOG_LEVEL must be one of .*DEBUG.*, got 'verbose'"),
    ],
)
def test_it_refuses_bad_values(env: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        Config.from_env(env)
