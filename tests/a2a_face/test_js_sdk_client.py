"""The official JavaScript SDK's clients against the platform's face on a real daphne:
``@a2a-js/sdk`` 1.3 (A2A 1.0) on both bindings and 0.3.14 (A2A 0.3, JSON-RPC). Discovery
from the card, send, get, list, cancel, stream, subscribe across an answer, push configs
and the SDK's error for an unknown task. The agent behind is the real a2a-sdk test agent.
Slow."""

from __future__ import annotations

from typing import Any

import pytest

from a2a.push_models import PushNotificationConfig
from tests.a2a_face.webhook import Webhook
from tests.support.js_sdk import run_js_client

pytestmark = pytest.mark.slow


@pytest.mark.parametrize(
    ("binding", "transport", "errors"),
    [("JSONRPC", "JsonRpcTransport", "JsonRpc"), ("HTTP+JSON", "RestTransport", "Rest")],
)
def test_the_javascript_sdk_client_uses_the_platform(
    world: dict[str, Any], binding: str, transport: str, errors: str
) -> None:
    hook = Webhook()
    try:
        seen = run_js_client("1.3", world["url"], world["alice"], binding, "ce-review", hook.url)
        hook.wait_for_state("TASK_STATE_COMPLETED", timeout=30)
    finally:
        hook.close()
    assert transport in seen["transport"]  # the class (the REST one is named _RestTransport)
    # The extended card, read with the caller's own token, names the agent of the skill.
    assert any(world["agent"].id in text for text in seen["extendedSkills"])
    assert seen["send"] == {"state": "TASK_STATE_COMPLETED", "artifact": {"verdict": "pass"}}
    assert seen["get"] == {"same": True, "state": "TASK_STATE_COMPLETED", "history": 1}
    assert seen["list"] == [True]
    assert seen["busy"] in {"TASK_STATE_SUBMITTED", "TASK_STATE_WORKING"}
    assert seen["cancel"] == "TASK_STATE_CANCELED"
    assert seen["stream"][-1] == "TASK_STATE_COMPLETED"
    assert seen["asked"] == "TASK_STATE_INPUT_REQUIRED"
    assert seen["answered"] == "TASK_STATE_COMPLETED"
    assert seen["answer"]["answer"] == "EU"  # the agent echoes the reply's data
    assert seen["subscribed"][0] == "TASK_STATE_INPUT_REQUIRED"
    assert seen["subscribed"][-1] == "TASK_STATE_COMPLETED"
    assert seen["push"] == {
        "created": True,
        "read": "tok-js-2",
        "scheme": "Bearer",
        "listed": ["hook-js"],
        "after": 0,
    }
    not_found = {"taskNotFound": True, "name": f"{errors}TaskNotFoundError"}
    assert seen["unknown"] == seen["unknownCancel"] == not_found
    # The config sent with the message reached the hook with its token.
    pushed = [(h, b) for h, b in hook.received if b["task"]["id"] == seen["pushedTask"]]
    assert pushed
    assert {h.get("X-A2A-Notification-Token") for h, _ in pushed} == {"tok-js-1"}
    assert not PushNotificationConfig.objects.filter(config_id="hook-js").exists()


def test_the_javascript_sdk_0_3_client_uses_the_platform(world: dict[str, Any]) -> None:
    hook = Webhook()
    try:
        seen = run_js_client("0.3", world["url"], world["alice"], "ce-review", hook.url)
    finally:
        hook.close()
    assert seen["card"] == "0.3"
    assert seen["send"] == {"kind": "task", "state": "completed", "artifact": {"verdict": "pass"}}
    assert seen["get"] == {"same": True, "state": "completed", "history": 1}
    assert seen["busy"] in {"submitted", "working"}
    assert seen["cancel"] == "canceled"
    assert seen["stream"][-1] == "completed"
    assert (seen["asked"], seen["answered"]) == ("input-required", "completed")
    assert seen["subscribed"][0] == "input-required"
    assert seen["subscribed"][-1] == "completed"
    assert seen["push"] == {
        "stored": True,
        "read": "tok-js03",
        "schemes": ["Bearer"],
        "listed": ["hook-js03"],
        "after": 0,
    }
    assert seen["unknown"] == {"taskNotFound": True, "name": "TaskNotFoundJSONRPCError"}
    assert seen["unknownStream"] == seen["unknown"]
