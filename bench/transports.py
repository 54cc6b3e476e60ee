"""Benchmark: the platform's hand-written agent transports against the a2a-sdk 1.3 client.

    .venv/bin/python bench/transports.py [--calls 500] [--write]

One a2a-sdk test agent (``tests/support/agents.py``, HTTP+JSON 1.0 and a JSON-RPC route)
runs in its own process on loopback; this process makes ``--calls`` sequential
``message:send`` calls of an instant task (the answer is the finished Task) per client,
after a warm-up, and reports wall time and this process's CPU per call:

* ``hand-written HTTP+JSON`` / ``hand-written JSON-RPC`` — ``a2a.transports`` (sync,
  the shared pooled httpx client, JSON dicts), as the worker calls them;
* ``a2a-sdk RestTransport, async loop`` — the SDK's client transport (protobuf request
  and response, httpx.AsyncClient), all calls awaited on one event loop: its best case;
* ``a2a-sdk RestTransport from sync code`` — the same, each call run to completion on a
  persistent loop from the synchronous worker (how the worker would have to use it).

``--write`` replaces this benchmark's section of docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "platform_site.settings")
os.environ.setdefault("ALLOW_LOOPBACK_URLS", "true")

import django  # noqa: E402

django.setup()

import httpx  # noqa: E402
from a2a.client.transports.rest import RestTransport as SdkRest  # noqa: E402
from a2a.types import a2a_pb2 as pb  # noqa: E402
from report import write_section  # noqa: E402

from a2a.transports.jsonrpc import JsonRpcTransport  # noqa: E402
from a2a.transports.rest import RestTransport  # noqa: E402
from a2a.wire import user_message  # noqa: E402
from agent_profiles.interfaces import CallTarget  # noqa: E402
from tests.support.serving import free_port  # noqa: E402

AGENT = """
import sys, time
from a2a.server.routes import create_jsonrpc_routes
import tests.support.agents as agents
base = agents.build_app
def build(agent):
    app = base(agent)
    from a2a.server.request_handlers import DefaultRequestHandler
    from a2a.server.tasks import InMemoryTaskStore
    handler = DefaultRequestHandler(agent_executor=agents.BehaviourExecutor(agent),
        task_store=InMemoryTaskStore(), agent_card=agents.agent_card(agent.url))
    app.app.routes.extend(create_jsonrpc_routes(handler, rpc_url="/rpc"))
    return app
with agents.run_agent(int(sys.argv[1]), build=build) as agent:
    print("ready", flush=True)
    while True:
        time.sleep(3600)
"""


def measure(calls: int, one: Callable[[], object]) -> tuple[float, float]:
    """(wall ms per call, CPU ms per call) of ``calls`` sequential calls after a warm-up."""
    for _ in range(20):
        one()
    wall, cpu = time.perf_counter(), time.process_time()
    for _ in range(calls):
        one()
    return (
        (time.perf_counter() - wall) * 1000 / calls,
        (time.process_time() - cpu) * 1000 / calls,
    )


def sdk_request() -> pb.SendMessageRequest:
    message = pb.Message(message_id="m", role=pb.Role.ROLE_USER)
    message.parts.add().data.struct_value.update({"product": "lamp", "behaviour": "complete"})
    message.metadata.update({"skillId": "ce-review"})
    return pb.SendMessageRequest(
        message=message, configuration=pb.SendMessageConfiguration(return_immediately=True)
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=500)
    parser.add_argument("--write", action="store_true")
    args = parser.parse_args()
    port = free_port()
    agent = subprocess.Popen(
        [sys.executable, "-c", AGENT, str(port)], cwd=ROOT, stdout=subprocess.PIPE, text=True
    )
    try:
        if agent.stdout is None or agent.stdout.readline().strip() != "ready":
            raise SystemExit("the bench agent did not start")
        url = f"http://127.0.0.1:{port}"
        message = user_message(skill_id="ce-review", data={"product": "lamp"})
        rest = RestTransport(CallTarget(agent_id="bench", url=url))
        rpc = JsonRpcTransport(CallTarget(agent_id="bench", url=url + "/rpc", binding="JSONRPC"))
        rows: list[tuple[str, float, float]] = []
        rows.append(("hand-written HTTP+JSON", *measure(args.calls, lambda: rest.send(message))))
        rows.append(("hand-written JSON-RPC", *measure(args.calls, lambda: rpc.send(message))))

        loop = asyncio.new_event_loop()
        client = httpx.AsyncClient(headers={"A2A-Version": "1.0"})
        sdk = SdkRest(client, pb.AgentCard(), url)
        request = sdk_request()

        async def many(n: int) -> None:
            for _ in range(n):
                await sdk.send_message(request)

        loop.run_until_complete(many(20))
        wall, cpu = time.perf_counter(), time.process_time()
        loop.run_until_complete(many(args.calls))
        rows.append(
            (
                "a2a-sdk RestTransport, async loop",
                (time.perf_counter() - wall) * 1000 / args.calls,
                (time.process_time() - cpu) * 1000 / args.calls,
            )
        )
        rows.append(
            (
                "a2a-sdk RestTransport from sync code",
                *measure(args.calls, lambda: loop.run_until_complete(sdk.send_message(request))),
            )
        )
        loop.run_until_complete(client.aclose())
        loop.close()
    finally:
        agent.terminate()
        agent.wait(timeout=10)
    base_cpu = rows[0][2]
    table = [
        "| client | wall ms / call | CPU ms / call | CPU vs hand-written |",
        "|---|---:|---:|---:|",
    ]
    for name, wall, cpu in rows:
        table.append(f"| {name} | {wall:.2f} | {cpu:.2f} | {cpu / base_cpu:.2f}x |")
    text = "\n".join(table)
    print(text)
    if args.write:
        load = os.getloadavg()[0]
        section = (
            "## Agent transports: hand-written vs a2a-sdk client (`bench/transports.py`)\n\n"
            f"{args.calls} sequential `message:send` calls of an instant task to one a2a-sdk "
            f"agent in its own process on loopback (load average {load:.1f} on 2 cores); "
            "CPU is the calling process's.\n\n"
            f"{text}\n\n"
            "The hand-written transports stay: the worker is synchronous and works on JSON "
            "dicts (the rows, the one mapping), so the SDK client would add protobuf "
            "conversion both ways plus an event loop per worker thread, for the same bytes "
            "on the wire. The SDK is still the reference: every binding and version is "
            "tested against real a2a-sdk 1.3 and 0.3.26 agents (tests/a2a/test_peers.py)."
        )
        write_section("transports", section)


if __name__ == "__main__":
    main()
