"""The Node.js adapter at its edges: bad requests, odd handler results, a gateway that is
down or silent, no transport at all, and the docs' own example (under real ``node``)."""

from __future__ import annotations

import asyncio
import json
import re
import shutil
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import jsonschema
import pytest
import websockets

from a2a.adapter import render_adapter
from tests.support.processes import Proc, running
from tests.support.serving import free_port

pytestmark = pytest.mark.slow

NODE = shutil.which("node")
ROOT = Path(__file__).resolve().parents[2]
SKILLS = json.loads((ROOT / "agent_profiles/fixtures/example_skills.json").read_text())
CE_SKILL = next(s for s in SKILLS if s["id"] == "ce-certification-review-v1")
INPUT = {
    "product_name": "Kettle",
    "category": "toy",
    "target_markets": ["DE"],
    "intended_use": "play",
    "rated_voltage_v": 4,
}
V1 = {"A2A-Version": "1.0"}

# One HTTP side per handler, picked by MODE.
HTTP_DRIVER = """
const { serveAgent, demoHandler } = require("./adapter.js");
const cycle = {}; cycle.self = cycle;
const handlers = {
  demo: demoHandler,
  bigint: async () => ({ output: { n: 10n } }),
  cycle: async () => ({ output: cycle }),
  qtext: async ({ answers }) => answers.length ? { output: {} }
    : { question: "Which market will the product be sold in?", text: "I need one more detail." },
};
serveAgent({ skill: JSON.parse(process.env.SKILL_JSON), port: Number(process.env.A2A_PORT),
             handler: handlers[process.env.MODE] }).then(() => console.log("listening"));
"""

# The gateway side only (no HTTP), against whatever listens at the adapter's platform URL.
GATEWAY_DRIVER = """
const { serveAgent } = require("./adapter.js");
serveAgent({ skill: { id: "s" }, http: "off", reconnectMax: 1, connectTimeout: 1 })
  .then((agent) => { agent.apiKey = "k"; agent.gateway.start(); console.log("started"); });
"""


def need_node() -> str:
    if NODE is None:
        pytest.skip("node is not installed (CI installs it): the Node.js adapter is untested here")
    return NODE


def wait_until(predicate: Callable[[], bool], timeout: float) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if predicate():
            return True
        time.sleep(0.1)
    return predicate()


# ---------------------------------------------------------------------------------------
# The HTTP side
# ---------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def agents(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """URL per handler mode, each its own node process."""
    node = need_node()
    tmp = tmp_path_factory.mktemp("node-edges")
    (tmp / "adapter.js").write_text(render_adapter("http://127.0.0.1:9"))
    (tmp / "serve.js").write_text(HTTP_DRIVER)
    urls: dict[str, str] = {}
    with ExitStack() as stack:
        for mode in ("demo", "bigint", "cycle", "qtext"):
            port = free_port()
            env = {
                "PATH": "/usr/bin:/bin",
                "A2A_PORT": str(port),
                "MODE": mode,
                "SKILL_JSON": json.dumps(CE_SKILL),
            }
            proc = stack.enter_context(
                running(Proc([node, str(tmp / "serve.js")], env, name=f"node-{mode}"))
            )
            proc.wait_log("listening", timeout=20)
            urls[mode] = f"http://127.0.0.1:{port}"
        yield urls


def send(url: str, body: object, headers: dict[str, str] = V1) -> httpx.Response:
    return httpx.post(f"{url}/message:send", json=body, headers=headers, timeout=15)


def msg(mid: str, parts: list[Any], **extra: object) -> dict[str, Any]:
    return {"message": {"messageId": mid, "role": "ROLE_USER", "parts": parts, **extra}}


def reason(response: httpx.Response) -> str:
    error = response.json()["error"]
    assert error["code"] == response.status_code
    detail = error["details"][0]
    assert detail["domain"] == "a2a-protocol.org"
    return detail["reason"]


@pytest.mark.parametrize("part", [None, "text", 3, ["a"]])
def test_a_part_that_is_not_an_object_is_a_400_invalid_params(
    agents: dict[str, str], part: object
) -> None:
    response = send(agents["demo"], msg("bad-part", [{"text": "hi"}, part]))
    assert response.status_code == 400, response.text
    assert reason(response) == "INVALID_PARAMS"
    assert "parts[1]" in response.json()["error"]["message"]


def test_a_body_over_1_mb_gets_a_413_and_the_connection_closed(agents: dict[str, str]) -> None:
    body = b'{"message": {"messageId": "big", "parts": [{"text": "' + b"a" * 2_000_000 + b'"}]}}'
    response = httpx.post(f"{agents['demo']}/message:send", content=body, headers=V1, timeout=15)
    assert response.status_code == 413, response.text
    assert reason(response) == "PAYLOAD_TOO_LARGE"
    assert response.headers["connection"] == "close"
    assert (
        send(agents["demo"], msg("after-big", [{"data": INPUT}])).status_code == 200
    )  # still serving


@pytest.mark.parametrize("version", ["0.3", "9.9", "1.0.0.0", "one"])
def test_an_a2a_version_other_than_1_x_is_refused(agents: dict[str, str], version: str) -> None:
    body = {**msg(f"v-{version}", [{"text": "hi"}]), "configuration": {"returnImmediately": True}}
    response = send(agents["demo"], body, headers={"A2A-Version": version})
    assert response.status_code == 400, response.text
    assert reason(response) == "VERSION_NOT_SUPPORTED"
    unknown = httpx.get(f"{agents['demo']}/tasks/nope", headers={"A2A-Version": version})
    assert reason(unknown) == "VERSION_NOT_SUPPORTED"


@pytest.mark.parametrize(
    "headers", [{}, {"A2A-Version": "1.0"}, {"A2A-Version": "1.2"}, {"A2A-Version": ""}]
)
def test_no_a2a_version_or_any_1_x_is_served(
    agents: dict[str, str], headers: dict[str, str]
) -> None:
    response = send(agents["demo"], msg(f"ok-{headers}", [{"data": INPUT}]), headers=headers)
    assert response.status_code == 200, response.text
    assert response.json()["task"]["status"]["state"] == "TASK_STATE_COMPLETED"


def test_an_answer_sent_again_after_the_task_ended_gets_the_task(agents: dict[str, str]) -> None:
    url = agents["demo"]
    first = send(url, msg("q-first", [{"data": {**INPUT, "demo": {"ask": "Under 3?"}}}])).json()[
        "task"
    ]
    assert first["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
    answer = msg(
        "q-answer", [{"text": "no, from 8"}], taskId=first["id"], contextId=first["contextId"]
    )
    once = send(url, answer)
    again = send(url, answer)  # a retry of a send whose reply was lost
    assert once.json()["task"]["status"]["state"] == "TASK_STATE_COMPLETED"
    assert again.status_code == 200, again.text
    assert again.json()["task"] == once.json()["task"]  # used once
    other = send(url, msg("q-late", [{"text": "more"}], taskId=first["id"]))
    assert other.status_code == 400  # a new message on an ended task is still refused
    assert reason(other) == "UNSUPPORTED_OPERATION"


@pytest.mark.parametrize("mode", ["bigint", "cycle"])
def test_handler_output_that_is_not_json_fails_the_task(agents: dict[str, str], mode: str) -> None:
    url = agents[mode]
    sent = send(
        url, {**msg(f"nj-{mode}", [{"data": INPUT}]), "configuration": {"returnImmediately": True}}
    )
    task_id = sent.json()["task"]["id"]
    got: dict[str, Any] = {}

    def failed() -> bool:
        got.update(httpx.get(f"{url}/tasks/{task_id}", headers=V1).json())
        return got.get("status", {}).get("state") == "TASK_STATE_FAILED"

    assert wait_until(failed, 10), got
    assert got["status"]["message"]["parts"][0]["text"].startswith("handler output is not JSON: ")
    assert httpx.get(f"{url}/health").status_code == 200


def test_a_question_with_text_sends_both(agents: dict[str, str]) -> None:
    task = send(agents["qtext"], msg("qt", [{"data": INPUT}])).json()["task"]
    assert task["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
    assert task["status"]["message"]["parts"] == [
        {"text": "I need one more detail."},
        {"text": "Which market will the product be sold in?"},
    ]


# ---------------------------------------------------------------------------------------
# The gateway side
# ---------------------------------------------------------------------------------------


class FakeGateway:
    """A WebSocket server on a fixed port that can stop and start again (a platform restart)."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.auths: list[dict[str, Any]] = []
        self.loop = asyncio.new_event_loop()
        threading.Thread(target=self.loop.run_forever, daemon=True).start()
        self.server: Any = None

    async def _handler(self, ws: Any) -> None:
        async for raw in ws:
            frame = json.loads(raw)
            if frame.get("type") == "auth":
                self.auths.append(frame)

    def _run(self, coro: Any) -> None:
        asyncio.run_coroutine_threadsafe(coro, self.loop).result(10)

    def start(self) -> None:
        async def go() -> None:
            self.server = await websockets.serve(self._handler, "127.0.0.1", self.port)

        self._run(go())

    def stop(self) -> None:
        async def go() -> None:
            self.server.close()
            await self.server.wait_closed()

        self._run(go())


def gateway_agent(tmp: Path, port: int) -> Proc:
    node = need_node()
    (tmp / "adapter.js").write_text(render_adapter(f"http://127.0.0.1:{port}"))
    (tmp / "drive.js").write_text(GATEWAY_DRIVER)
    env = {"PATH": "/usr/bin:/bin", "A2A_PORT": str(free_port())}
    return Proc([node, "--experimental-websocket", str(tmp / "drive.js")], env, name="node-gateway")


def test_the_gateway_reconnects_after_connections_were_refused(tmp_path: Path) -> None:
    port = free_port()
    gateway = FakeGateway(port)
    gateway.start()
    with running(gateway_agent(tmp_path, port)) as proc:
        assert wait_until(lambda: len(gateway.auths) == 1, 15), proc.log_text()
        gateway.stop()  # the platform restarts: refused for a while (Node 20: "error", no "close")
        time.sleep(3)
        gateway.start()
        assert wait_until(lambda: len(gateway.auths) >= 2, 15), proc.log_text()
        assert proc.alive()
        assert "gateway error" in proc.log_text()


def test_a_gateway_connect_that_never_opens_is_given_up_and_tried_again(tmp_path: Path) -> None:
    # A socket that accepts and never answers the handshake: the WebSocket stays CONNECTING.
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(16)
    accepted: list[socket.socket] = []

    def accept() -> None:
        while True:
            try:
                accepted.append(silent.accept()[0])
            except OSError:
                return

    threading.Thread(target=accept, daemon=True).start()
    try:
        with running(gateway_agent(tmp_path, silent.getsockname()[1])) as proc:
            assert wait_until(lambda: len(accepted) >= 2, 15), proc.log_text()
            assert "connect timed out" in proc.log_text()
            assert proc.alive()
    finally:
        silent.close()
        for conn in accepted:
            conn.close()


class FakePlatform(BaseHTTPRequestHandler):
    """Enough platform for startAgent to register, counting the registrations."""

    registrations = 0

    def _json(self, status: int, body: object) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        self._json(200, [{"id": "s1", "name": "S", "description": "d", "output_schema": {}}])

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers["Content-Length"]))
        FakePlatform.registrations += 1
        self._json(201, {"profile": {}, "apiKey": "k"})

    def log_message(self, *args: object) -> None:
        pass


def test_no_http_and_no_websocket_is_a_config_error_before_registering(tmp_path: Path) -> None:
    node = need_node()  # Node 20 without --experimental-websocket has no WebSocket
    has_ws = subprocess.run([node, "-e", "process.exit(globalThis.WebSocket ? 0 : 1)"], check=False)
    if has_ws.returncode == 0:
        pytest.skip("this node has a WebSocket built in")
    server = ThreadingHTTPServer(("127.0.0.1", 0), FakePlatform)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    (tmp_path / "adapter.js").write_text(
        render_adapter(f"http://127.0.0.1:{server.server_address[1]}")
    )
    env = {"PATH": "/usr/bin:/bin", "SKILL_ID": "s1", "A2A_HTTP": "off", "A2A_PUBLIC_URL": "none"}
    try:
        done = subprocess.run(
            [node, "adapter.js"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=30
        )
    finally:
        server.shutdown()
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("adapter.js: error: ")
    assert "A2A_HTTP=off" in lines[0]
    assert "WebSocket" in lines[0]
    assert FakePlatform.registrations == 0


# ---------------------------------------------------------------------------------------
# docs/adapter-js.md's "Write your agent"
# ---------------------------------------------------------------------------------------

# Stands in for adapter.js: keeps the handler the example passes and runs it as a person
# would meet it (the question, then each answer), printing what it returns.
FAKE_ADAPTER = """
exports.startAgent = async ({ skillId, handler }) => {
  const input = JSON.parse(process.env.INPUT_JSON);
  const signal = new AbortController().signal;
  const base = { input, skill: { id: skillId }, taskId: "t", contextId: "c", signal };
  const results = [await handler({ ...base, answers: [] })];
  for (const answer of ["yes", "no"]) results.push(await handler({ ...base, answers: [answer] }));
  console.log(JSON.stringify({ skillId, results }));
};
"""


def test_the_write_your_agent_example_fits_its_skill(tmp_path: Path) -> None:
    node = need_node()
    doc = (ROOT / "docs/adapter-js.md").read_text()
    example = re.search(r"```js\n(// my-agent\.js.*?)```", doc, re.S)
    assert example is not None
    (tmp_path / "adapter.js").write_text(FAKE_ADAPTER)
    (tmp_path / "my-agent.js").write_text(example[1])
    env = {"PATH": "/usr/bin:/bin", "INPUT_JSON": json.dumps(INPUT)}
    done = subprocess.run(
        [node, "my-agent.js"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=30
    )
    assert done.returncode == 0, done.stderr
    ran = json.loads(done.stdout)
    skill = next(s for s in SKILLS if s["id"] == ran["skillId"])
    question, *finished = ran["results"]
    assert question["question"]
    validator = jsonschema.Draft202012Validator(skill["output_schema"])
    for result in finished:
        assert [e.message for e in validator.iter_errors(result["output"])] == []
