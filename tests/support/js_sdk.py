"""The official JavaScript A2A SDK as a peer, independent of the platform's Python stack:
``@a2a-js/sdk`` 1.3 (A2A 1.0) and 0.3.14 (A2A 0.3), each as an agent and as a client: the
versions people run.

``js_peer_dir(version)`` installs that version's pinned npm packages into
``.peers/a2a-js-<version>/`` (git-ignored) on first use, under a file lock so parallel
test processes build it once, and copies the scripts of ``tests/support/js/`` next to its
``node_modules`` (an ES module resolves packages from its own folder). A later run reuses
the install while the pins are unchanged. Without ``node`` and ``npm`` the tests that
need them skip, as the Node.js adapter's do (these machines and CI have Node.js 20).

    with run_js_agent("1.3", bindings="jsonrpc", push=True) as peer:
        agent = make_agent(skills=[skill], a2a_endpoint=peer.url)
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import shutil
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.processes import Proc, running

BASE_DIR = Path(__file__).resolve().parents[2]
PEERS = BASE_DIR / ".peers"
SCRIPTS = Path(__file__).resolve().parent / "js"
# Express is the SDK's (optional) peer dependency for its servers.
PACKAGES = {
    "1.3": {"@a2a-js/sdk": "1.3.0", "express": "5.2.1"},
    "0.3": {"@a2a-js/sdk": "0.3.14", "express": "5.2.1"},
}
AGENT_SCRIPTS = {"1.3": "agent.mjs", "0.3": "agent03.mjs"}
CLIENT_SCRIPTS = {"1.3": "client.mjs", "0.3": "client03.mjs"}


def js_peer_dir(version: str = "1.3") -> Path:
    """The folder with that version of the JavaScript SDK and the scripts beside it."""
    node, npm = shutil.which("node"), shutil.which("npm")
    if node is None or npm is None:
        pytest.skip("node and npm are not installed: the JavaScript SDK peers are untested here")
    folder = PEERS / f"a2a-js-{version}"
    stamp = folder / ".installed"
    wanted = json.dumps(PACKAGES[version], sort_keys=True)
    PEERS.mkdir(exist_ok=True)
    with open(PEERS / f".a2a-js-{version}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (stamp.exists() and stamp.read_text() == wanted):
            shutil.rmtree(folder, ignore_errors=True)
            folder.mkdir()
            manifest = {"name": "a2a-js-peer", "private": True, "dependencies": PACKAGES[version]}
            (folder / "package.json").write_text(json.dumps(manifest, indent=2))
            subprocess.run(
                [npm, "install", "--no-audit", "--no-fund", "--loglevel=error"],
                cwd=folder,
                check=True,
                timeout=300,
            )
            stamp.write_text(wanted)
        for script in SCRIPTS.glob("*.mjs"):
            shutil.copyfile(script, folder / script.name)
    return folder


class JsAgent:
    """A running agent script (``agent.mjs``, ``agent03.mjs``): its base URL and what it
    counted (``GET /_stats``)."""

    __test__ = False

    def __init__(self, proc: Proc, url: str) -> None:
        self.proc = proc
        self.url = url

    def stats(self) -> dict[str, Any]:
        return httpx.get(f"{self.url}/_stats", timeout=5).json()

    def requests(self, pattern: str) -> int:
        """Requests whose ``"METHOD path"`` matches the regular expression ``pattern``."""
        regex = re.compile(pattern)
        return sum(n for key, n in self.stats()["requests"].items() if regex.search(key))

    def wait_pushes_settled(self, quiet: float = 0.5, timeout: float = 10.0) -> None:
        """Wait until no push is in flight and none ended for ``quiet`` seconds (the SDK
        pushes a task's last events after the platform may have recorded its end)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            stats = self.stats()
            idle_ms = time.time() * 1000 - stats["lastPushAt"]
            if stats["pushing"] == 0 and idle_ms > quiet * 1000:
                return
            time.sleep(0.1)
        raise TimeoutError("the JavaScript agent's pushes did not settle")


@contextmanager
def run_js_agent(version: str, *, bindings: str, push: bool = False) -> Iterator[JsAgent]:
    """That version's agent script on a free loopback port, its card listing ``bindings``
    (``rest``, ``jsonrpc``) in that order."""
    folder = js_peer_dir(version)
    script = str(folder / AGENT_SCRIPTS[version])
    args = [shutil.which("node") or "node", script, "--bindings", bindings]
    args += ["--push"] if push else []
    with running(Proc(args, dict(os.environ), name="js-agent")) as proc:
        found = proc.wait_log(r'\{"url":"([^"]+)"\}', timeout=30)
        yield JsAgent(proc, found.group(1))


def run_js_client(version: str, *args: str, timeout: float = 180) -> dict[str, Any]:
    """Run that version's client script with ``args``; the JSON object its last line
    prints."""
    folder = js_peer_dir(version)
    node = shutil.which("node") or "node"
    run = subprocess.run(
        [node, str(folder / CLIENT_SCRIPTS[version]), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    assert run.returncode == 0, run.stderr[-3000:] + run.stdout[-2000:]
    return json.loads(run.stdout.strip().splitlines()[-1])
