"""A cached virtual environment with a2a-sdk 0.3 (A2A 0.3 peers: agents and clients).

a2a-sdk 0.3 and 1.x cannot share one environment, so 0.3 peers run as child processes
of this interpreter: ``legacy_python()`` creates ``.peers/a2a-sdk-0.3/`` (git-ignored)
on first use, under a file lock so parallel test processes build it once, and returns
its Python. A later run reuses it while the pinned requirements are unchanged.
"""

from __future__ import annotations

import fcntl
import subprocess
import sys
from pathlib import Path

BASE_DIR = Path(__file__).resolve().parents[2]
PEERS = BASE_DIR / ".peers"
LEGACY_REQUIREMENTS = (
    "a2a-sdk[http-server]==0.3.26",
    "uvicorn==0.54.0",
    "httpx==0.28.1",
    "sse-starlette==3.0.2",
)


def legacy_python() -> Path:
    """The Python of the a2a-sdk 0.3 environment, created on first use."""
    venv = PEERS / "a2a-sdk-0.3"
    python = venv / "bin" / "python"
    stamp = venv / ".installed"
    wanted = "\n".join(LEGACY_REQUIREMENTS)
    PEERS.mkdir(exist_ok=True)
    with open(PEERS / ".a2a-sdk-0.3.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if stamp.exists() and stamp.read_text() == wanted and python.exists():
            return python
        subprocess.run([sys.executable, "-m", "venv", "--clear", str(venv)], check=True)
        subprocess.run(
            [str(python), "-m", "pip", "install", "--quiet", *LEGACY_REQUIREMENTS],
            check=True,
        )
        stamp.write_text(wanted)
    return python
