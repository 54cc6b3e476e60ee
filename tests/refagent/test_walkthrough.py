"""README.md's walk-through, run as written: its shell blocks against a real embedded platform
(seeded like ``make run``) and the reference agent started by the documented command.

Blocks are marked ``<!-- walkthrough: KIND -->``: ``platform`` (``make run``; here the same
``runplatform`` on a free port, against the test database), ``agent`` / ``agent-http-off``
(the agent's command, run as a process), ``shell`` (run in order by bash, sharing exported
variables). The only substitution is the platform's URL."""

from __future__ import annotations

import json
import re
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.refagent.processes import agent_env
from tests.support.processes import BASE_DIR, Proc, embedded_platform, platform_env, running

pytestmark = pytest.mark.slow

DOC = BASE_DIR / "README.md"
DOC_URL = "http://127.0.0.1:8000"
BLOCK = re.compile(r"<!-- walkthrough: ([a-z-]+) -->\s*```sh\n(.*?)```", re.S)


@dataclass
class Step:
    kind: str
    code: str


def doc_steps() -> list[Step]:
    return [Step(kind, code) for kind, code in BLOCK.findall(DOC.read_text())]


def readme_short_version() -> tuple[list[str], Step]:
    """README's "In short" block: the two long-running commands, and the rest."""
    readme = (BASE_DIR / "README.md").read_text()
    code = re.search(r"In short[^\n]*:\s*```sh\n(.*?)```", readme, re.S)
    assert code, "README.md lost its short walk-through"
    lines = code.group(1).splitlines()
    return [line.split("#")[0].strip() for line in lines[:2]], Step("shell", "\n".join(lines[2:]))


class Shell:
    """Runs the doc's shell blocks one after another, like one terminal session."""

    def __init__(self, url: str, tmp: Path) -> None:
        self.url, self.state = url, tmp / "session.sh"
        self.env = platform_env()

    def run(
        self, step: Step, timeout: float = 60, *, expect_failure: bool = False
    ) -> subprocess.CompletedProcess[str]:
        code = step.code
        script = "\n".join(
            [
                "set -euo pipefail",
                f"if [ -f {self.state} ]; then source {self.state}; fi",
                code.replace(DOC_URL, self.url),
                f"export -p > {self.state}",
            ]
        )
        result = subprocess.run(
            ["bash", "-c", script],
            env=self.env,
            cwd=BASE_DIR,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        failed = result.returncode != 0
        assert failed == expect_failure, (
            f"{code}\n--- stdout\n{result.stdout}\n--- stderr\n{result.stderr}"
        )
        return result

    def var(self, name: str) -> str:
        match = re.search(rf'^declare -x {name}="(.*)"$', self.state.read_text(), re.M)
        assert match, name
        return match.group(1)


@contextmanager
def doc_agent(step: Step, url: str, tmp: Path) -> Iterator[Proc]:
    """The agent started by the doc's command (the platform URL and a free port via env)."""
    env = agent_env(url, tmp)
    proc = Proc(["bash", "-c", step.code.strip()], env, name="walkthrough-agent")
    with running(proc):
        proc.wait_log(r"gateway connected", timeout=30)
        yield proc


@contextmanager
def platform_as_make_run(step: Step) -> Iterator[Any]:
    assert step.kind == "platform"
    assert step.code.strip().splitlines()[-1] == "make run"
    with embedded_platform(seed=True) as platform:  # what `make run` runs, on a free port
        yield platform


def registry_doc_register() -> Step:
    """docs/registry.md's registration example (its one ``register`` curl block)."""
    blocks = re.findall(r"```sh\n(.*?)```", (BASE_DIR / "docs" / "registry.md").read_text(), re.S)
    register = [b for b in blocks if "/api/agent-profiles/register" in b and "curl" in b]
    assert register, "docs/registry.md lost its registration example"
    return Step("shell", register[0])


def answer_in_the_admin(url: str, task_id: str, answer: str) -> None:
    """What a person does in the browser: log in, open the reply form, send the answer."""
    with httpx.Client(base_url=url, follow_redirects=True, timeout=10) as browser:
        login = browser.get("/admin/login/")
        token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', login.text)
        assert token
        form = {"username": "admin", "password": "walkthrough", "next": "/admin/"}
        browser.post("/admin/login/", data={**form, "csrfmiddlewaretoken": token.group(1)})
        page = browser.get(f"/admin/a2a/task/{task_id}/change/")
        assert "Is it for children under 3?" in page.text  # on top, with the reply form
        assert "Send the answer" in page.text
        token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text)
        assert token
        sent = browser.post(
            f"/admin/a2a/task/{task_id}/reply/",
            data={"text": answer, "data": "", "csrfmiddlewaretoken": token.group(1)},
        )
        assert "Reply sent to the agent." in sent.text


def wait_state(url: str, token: str, task_id: str, state: str) -> dict[str, Any]:
    headers = {"Authorization": f"Bearer {token}"}
    deadline = time.monotonic() + 30
    while True:
        task = httpx.get(f"{url}/api/tasks/{task_id}", headers=headers).json()
        if task["state"] == state:
            return task
        assert time.monotonic() < deadline, task
        time.sleep(0.1)


def test_the_doc_has_the_steps_this_test_runs() -> None:
    kinds = [step.kind for step in doc_steps()]
    assert kinds == [
        "platform",
        "agent",
        "shell",
        "shell",
        "shell",
        "shell",
        "reply",
        "agent-http-off",
        "shell",
    ]


def test_the_walkthrough_works_as_written(transactional_db: None, tmp_path: Path) -> None:
    platform_step, agent_step, create, watch, admin, ask, reply, *_ = doc_steps()
    with (
        platform_as_make_run(platform_step) as platform,
        doc_agent(agent_step, platform.url, tmp_path),
    ):
        shell = Shell(platform.url, tmp_path)
        shell.run(create)
        watched = shell.run(watch)
        seen = [line.split('"')[3] for line in watched.stderr.split()]
        order = ["TASK_STATE_SUBMITTED", "TASK_STATE_WORKING", "TASK_STATE_COMPLETED"]
        assert seen == sorted(seen, key=order.index)  # in order (each state seen 1+ times)
        assert seen[-1] == "TASK_STATE_COMPLETED"
        output = json.loads(watched.stdout)["output"]
        assert output["verdict"] == "documents_missing"
        assert output["non_eea_markets"] == ["CH"]
        shell.run(admin)
        asked = shell.run(ask)
        assert "TASK_STATE_INPUT_REQUIRED" in asked.stderr
        question_task = shell.var("QUESTION_TASK")
        assert asked.stdout.strip() == f"{platform.url}/admin/a2a/task/{question_task}/change/"
        answer_in_the_admin(platform.url, question_task, "no, from 8 years")
        done = wait_state(platform.url, shell.var("TOKEN"), question_task, "TASK_STATE_COMPLETED")
        assert done["output"]["notes"] == "Users: no, from 8 years"
        assert done["output"]["verdict"] == "documents_missing"

        # The same answer without a browser: step 6's curl, on a second question task.
        shell.run(ask)
        second = shell.var("QUESTION_TASK")
        assert second != question_task
        replied = json.loads(shell.run(reply).stdout)
        assert replied["id"] == second
        done = wait_state(platform.url, shell.var("TOKEN"), second, "TASK_STATE_COMPLETED")
        assert done["output"]["notes"] == "Users: no, from 8 years"

        # README.md repeats the first steps in short: the same commands, and they work too.
        long_running, rest = readme_short_version()
        assert long_running == ["make run", agent_step.code.strip()]
        created = json.loads(shell.run(rest).stdout)
        assert created["skillId"] == "ce-certification-review-v1"
        wait_state(platform.url, shell.var("TOKEN"), created["id"], "TASK_STATE_COMPLETED")

        # docs/registry.md's registration curl works as written too (last: it adds an agent
        # that matching could pick).
        registered = json.loads(shell.run(registry_doc_register()).stdout)
        assert registered["profile"]["agentId"] == "acme-ce"
        assert registered["apiKey"]


def test_the_walkthrough_fallback_works_as_written(transactional_db: None, tmp_path: Path) -> None:
    platform_step, _agent, create, watch, *_, http_off, fallback = doc_steps()
    assert http_off.kind == "agent-http-off"
    with (
        platform_as_make_run(platform_step) as platform,
        doc_agent(http_off, platform.url, tmp_path) as agent,
    ):
        shell = Shell(platform.url, tmp_path)
        # A refused task: README's pipeline shows the platform's error (not a KeyError),
        # and the watch step stops at once instead of polling a 404 forever.
        bad = Step("shell", create.code.replace("ce-certification-review-v1", "no-such-skill"))
        refused = shell.run(bad)
        assert '"error"' in refused.stderr
        assert "no-such-skill" in refused.stderr
        assert "KeyError" not in refused.stderr
        assert refused.stdout.strip() == "task"
        assert "TASK: no task id" in shell.run(watch, expect_failure=True).stderr

        shell.run(create)  # the token (and a first task, which falls back too)
        result = shell.run(fallback)
        assert "TASK_STATE_COMPLETED" in result.stderr
        transport, fallbacks = result.stdout.split(maxsplit=1)
        assert transport == "websocket"
        assert [(f["from"], f["to"]) for f in json.loads(fallbacks)] == [("a2a", "websocket")]
        assert "assigned over the WebSocket" in agent.log_text()
