"""A cached virtual environment with a2a-sdk 0.3 (A2A 0.3 peers: agents and clients).

a2a-sdk 0.3 and 1.x cannot share one environment, so 0.3 peers run as child processes
of this interpreter: ``legacy_python()`` creates ``.peers/a2a-sdk-0.3/`` (git-ignored)
on first use (:func:`tests.support.venvs.cached_venv`) and returns its Python.
"""

from __future__ import annotations

from pathlib import Path

from tests.support.venvs import cached_venv

LEGACY_REQUIREMENTS = (
    "a2a-sdk[http-server]==0.3.26",
    "uvicorn==0.54.0",
    "httpx==0.28.1",
    "sse-starlette==3.0.2",
)


def legacy_python() -> Path:
    """The Python of the a2a-sdk 0.3 environment, created on first use."""
    return cached_venv("a2a-sdk-0.3", LEGACY_REQUIREMENTS) / "bin" / "python"
