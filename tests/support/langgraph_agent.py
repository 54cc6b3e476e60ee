"""A LangGraph agent as a peer: the graph of ``tests/support/langgraph/`` served by
LangGraph's own server (``langgraph dev``: the in-memory LangGraph API, whose A2A endpoint
``/a2a/{assistant_id}`` is the one LangGraph Platform deployments serve), in its own
cached environment (``.peers/langgraph/``, :func:`tests.support.venvs.cached_venv`).

What the platform meets there, unlike an a2a-sdk agent: A2A 1.0 over JSON-RPC only, 0.3
shapes inside 1.0 answers (``kind`` fields), a ``SendMessage`` held until the run ends or
asks whatever ``returnImmediately`` says (a stream answers at once), the result kept as
the task's last message (``GetTask`` and ``ListTasks`` carry no artifact), and a question
asked with ``interrupt()``, answered by a message naming the task.

    with run_langgraph_agent() as peer:
        agent = make_agent(skills=[skill], a2a_endpoint=peer.url)
        ...
        assert peer.runs() == {...}
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

from tests.support.processes import Proc, running
from tests.support.serving import free_port
from tests.support.venvs import cached_venv

GRAPH = Path(__file__).resolve().parent / "langgraph"
REQUIREMENTS = (
    "langgraph-cli[inmem]==0.4.40",
    "langgraph-api==0.16.7",
    "langgraph-runtime-inmem==0.36.7",
    "langgraph==1.2.24",
    "langchain-core==1.8.3",
)


class LangGraphAgent:
    """A running LangGraph server: the A2A URL of its one assistant, and its runs."""

    __test__ = False

    def __init__(self, proc: Proc, base: str, assistant_id: str) -> None:
        self.proc = proc
        self.base = base
        self.url = f"{base}/a2a/{assistant_id}"

    def runs(self) -> dict[str, list[str]]:
        """Each thread's runs' statuses, oldest first (LangGraph's own API): a new A2A task
        is a new thread, its reply a second run on it."""
        threads = httpx.post(f"{self.base}/threads/search", json={"limit": 1000}, timeout=10)
        found: dict[str, list[str]] = {}
        for thread in threads.json():
            runs = httpx.get(f"{self.base}/threads/{thread['thread_id']}/runs", timeout=10).json()
            runs.sort(key=lambda run: run["created_at"])
            found[thread["thread_id"]] = [run["status"] for run in runs]
        return found


@contextmanager
def run_langgraph_agent() -> Iterator[LangGraphAgent]:
    """``langgraph dev`` on a free loopback port, with eight runs at a time (its default
    of ten per worker, as a deployment runs), from a copy of the graph's folder (the server
    keeps its state beside it)."""
    venv = cached_venv("langgraph", REQUIREMENTS)
    port = free_port()
    with tempfile.TemporaryDirectory(prefix="langgraph-") as folder:
        shutil.copytree(GRAPH, folder, dirs_exist_ok=True)
        args = [str(venv / "bin" / "langgraph"), "dev", "--no-browser", "--no-reload"]
        args += ["--host", "127.0.0.1", "--port", str(port), "--n-jobs-per-worker", "8"]
        args += ["--config", "langgraph.json"]
        env = {**os.environ, "LANGSMITH_TRACING": "false", "LANGGRAPH_CLI_NO_ANALYTICS": "1"}
        with running(Proc(args, env, name="langgraph", cwd=Path(folder))) as proc:
            proc.wait_log(r"Application started up", timeout=120)
            base = f"http://127.0.0.1:{port}"
            # Its lifespan logs "started up" before uvicorn listens (seen refused).
            proc.wait_http(f"{base}/ok")
            found = httpx.post(f"{base}/assistants/search", json={"graph_id": "agent"}, timeout=10)
            yield LangGraphAgent(proc, base, found.json()[0]["assistant_id"])
