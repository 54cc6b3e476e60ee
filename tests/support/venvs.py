"""Cached virtual environments for peers that cannot share the project's (a2a-sdk 0.3,
LangGraph's server): ``.peers/<name>/`` (git-ignored), created on first use under a file
lock so parallel test processes build it once, reused while its pinned requirements are
unchanged."""

from __future__ import annotations

import fcntl
import subprocess
import sys
from pathlib import Path

BASE_DIR = Path(__file__).resolve().parents[2]
PEERS = BASE_DIR / ".peers"


def cached_venv(name: str, requirements: tuple[str, ...]) -> Path:
    """The folder of the environment ``name`` with ``requirements`` installed."""
    venv = PEERS / name
    python = venv / "bin" / "python"
    stamp = venv / ".installed"
    wanted = "\n".join(requirements)
    PEERS.mkdir(exist_ok=True)
    with open(PEERS / f".{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if stamp.exists() and stamp.read_text() == wanted and python.exists():
            return venv
        subprocess.run([sys.executable, "-m", "venv", "--clear", str(venv)], check=True)
        subprocess.run(
            [str(python), "-m", "pip", "install", "--quiet", *requirements],
            check=True,
            timeout=600,
        )
        stamp.write_text(wanted)
    return venv
