"""The reference agent and the Node.js adapter as child processes, next to a live platform."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

from a2a.adapter import render_adapter
from tests.refagent.conftest import SCRIPTS
from tests.support.processes import PYTHON, Proc, running
from tests.support.serving import free_port

NODE = shutil.which("node")


def agent_env(platform_url: str, key_dir: Path, **env: str) -> dict[str, str]:
    """A clean environment for an agent child: no platform settings leak into it."""
    agent_id = env.get("AGENT_ID", "reference-agent")
    base = {
        "PATH": "/usr/bin:/bin",
        "PLATFORM_URL": platform_url,
        "AGENT_ID": agent_id,
        "A2A_PORT": str(free_port()),
        "AGENT_KEY_FILE": str(key_dir / f"{agent_id}.json"),
        "RECONNECT_MAX": "1",
        "PYTHONUNBUFFERED": "1",
    }
    return {**base, **env}


@contextmanager
def reference_agent(env: dict[str, str], *, wait_gateway: bool = True) -> Iterator[Proc]:
    """``scripts/a2a_server_reference.py`` with ``env``; ``proc.url`` is its A2A URL."""
    args = [PYTHON, str(SCRIPTS / "a2a_server_reference.py")]
    with running(Proc(args, env, name=f"agent-{env['AGENT_ID']}")) as proc:
        started(proc, env, wait_gateway)
        yield proc


@contextmanager
def node_agent(env: dict[str, str], tmp: Path, *, wait_gateway: bool = True) -> Iterator[Proc]:
    """The adapter as the platform serves it, run by ``node`` (with a WebSocket client)."""
    if NODE is None:
        pytest.skip("node is not installed (CI installs it): the Node.js adapter is untested here")
    script = tmp / "adapter.js"
    script.write_text(httpx.get(f"{env['PLATFORM_URL']}/api/a2a/adapter.js").text)
    args = [NODE, "--experimental-websocket", str(script)]
    with running(Proc(args, env, name=f"node-{env['AGENT_ID']}")) as proc:
        started(proc, env, wait_gateway)
        yield proc


def started(proc: Proc, env: dict[str, str], wait_gateway: bool) -> None:
    proc.wait_log(r"ready \(skill", timeout=30)
    if wait_gateway:
        proc.wait_log(r"gateway connected", timeout=30)
    proc.url = f"http://127.0.0.1:{env['A2A_PORT']}"  # type: ignore[attr-defined]


def render_to(tmp: Path, platform_url: str) -> Path:
    path = tmp / "adapter.js"
    path.write_text(render_adapter(platform_url))
    return path
