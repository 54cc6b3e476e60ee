"""Cached virtual environments for peers that cannot share the project's (a2a-sdk 0.3,
LangGraph's server, Google ADK, Strands Agents, Microsoft Agent Framework):
``.peers/<name>/`` (git-ignored), created on first use under a file lock so parallel test
processes build it once, reused while its pinned requirements are unchanged; and a peer
module of ``tests.support`` served from one (:func:`run_peer_module`, :func:`serve`).
Standard library only: peers' environments import this module too."""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

BASE_DIR = Path(__file__).resolve().parents[2]
PEERS = BASE_DIR / ".peers"


def cached_venv(name: str, requirements: tuple[str, ...]) -> Path:
    """The folder of the environment ``name`` with ``requirements`` installed."""
    venv = PEERS / name
    python = venv / "bin" / "python"
    stamp = venv / ".installed"
    # How it is built too: an environment built otherwise (pip, or uv without bytecode)
    # is built again.
    wanted = "\n".join([*requirements, "# uv --compile-bytecode"])
    PEERS.mkdir(exist_ok=True)
    with open(PEERS / f".{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if stamp.exists() and stamp.read_text() == wanted and python.exists():
            return venv
        # uv (pinned in requirements.txt), not venv + pip: the same packages from the same
        # registry in a fraction of the CPU, and a clean clone builds all seven at the
        # start of a run, beside its tests. Compiled to bytecode as pip does: with
        # PYTHONDONTWRITEBYTECODE set (CI here) each peer start would compile it all again.
        uv = [sys.executable, "-m", "uv", "--quiet"]
        subprocess.run([*uv, "venv", "--clear", "--python", sys.executable, str(venv)], check=True)
        subprocess.run(
            [*uv, "pip", "install", "--compile-bytecode", "--python", str(python), *requirements],
            check=True,
            timeout=600,
        )
        stamp.write_text(wanted)
    return venv


@dataclass
class PeerServer:
    """A peer served from its own environment: its process and base URL (the card is
    under it)."""

    __test__ = False
    proc: Any
    url: str


def peer_python(name: str, requirements: tuple[str, ...]) -> Path:
    """The Python of the environment ``name`` (built on first use)."""
    return cached_venv(name, requirements) / "bin" / "python"


@contextmanager
def run_peer_module(
    name: str, requirements: tuple[str, ...], module: str, env: dict[str, str]
) -> Iterator[PeerServer]:
    """``python -m module PORT`` in the environment ``name`` on a free loopback port, the
    project on its path (the module calls :func:`serve`), until uvicorn says it runs."""
    from tests.support.processes import Proc, running
    from tests.support.serving import free_port

    port = free_port()
    args = [str(peer_python(name, requirements)), "-m", module, str(port)]
    env = {**os.environ, "PYTHONPATH": str(BASE_DIR), **env}
    with running(Proc(args, env, name=name)) as proc:
        proc.wait_log(r"Uvicorn running on", timeout=120)
        yield PeerServer(proc, f"http://127.0.0.1:{port}")


def serve(build_app: Callable[[int], Any]) -> None:
    """A peer module's ``__main__``: the app ``build_app(port)`` makes, on the port given
    as the first argument."""
    import uvicorn

    port = int(sys.argv[1])
    uvicorn.run(build_app(port), host="127.0.0.1", port=port, log_level="info")
