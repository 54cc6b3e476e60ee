"""A local webhook for the face's push notifications, and a config pointing at it."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from a2a.face import push_configs
from a2a.models import Task
from a2a.push_models import PushDelivery, PushNotificationConfig


class Webhook:
    """A local webhook recording what it receives; answers ``status`` (a list is a script)."""

    def __init__(self) -> None:
        self.received: list[tuple[dict[str, str], Any]] = []
        self.statuses: list[int] = []
        self.echo = False  # answer with each header it got as X-Echo-<name> (a debug proxy)
        self.hold: dict[str, float] = {}  # seconds to wait before answering a POST, by state
        hook = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                payload = json.loads(body or b"null")
                hook.received.append((dict(self.headers), payload))
                state = ((payload or {}).get("task") or {}).get("status", {}).get("state")
                time.sleep(hook.hold.get(state, 0.0))
                status = hook.statuses.pop(0) if hook.statuses else 200
                self.send_response(status)
                for name, value in self.headers.items() if hook.echo else ():
                    self.send_header(f"X-Echo-{name}", value)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"
        threading.Thread(
            target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        ).start()

    def states(self) -> list[str]:
        """The task states of the notifications received, in the order they came."""
        return [body["task"]["status"]["state"] for _, body in self.received]

    def wait_for_state(self, state: str, timeout: float) -> None:
        """Block until a notification with ``state`` arrived (or ``timeout`` passed)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if any(body["task"]["status"]["state"] == state for _, body in self.received):
                return
            time.sleep(0.05)

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def push_config(url: str, **extra: Any) -> dict[str, Any]:
    """A push notification config for ``url`` with a token and credentials."""
    return {
        "url": url,
        "token": "tok-1",
        "authentication": {"scheme": "Bearer", "credentials": "c"},
    } | extra


def until(check: Callable[[], bool], timeout: float = 15.0) -> bool:
    """Whether ``check()`` came true within ``timeout`` seconds (looked at every 20 ms)."""
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


def working_then_canceled(
    task: Task, webhook: Webhook, captured: Any
) -> tuple[PushNotificationConfig, PushDelivery, PushDelivery]:
    """A config on ``task`` at ``webhook``, and the deliveries of its next two changes."""
    config = push_configs.create_config(task, push_config(webhook.url))
    with captured(execute=True):
        task.start_work()
    with captured(execute=True):
        task.cancel("a person canceled")
    working, canceled = PushDelivery.objects.filter(config=config).order_by("seq")
    return config, working, canceled
