"""Content toward and from A2A 0.3 agents is converted faithfully (a2a/transports/shapes.py).

What a 1.0 message holds must reach a 0.3 agent as the 0.3 shapes carry it, on both
bindings: every part's ``metadata``, every file's name, a data part whatever JSON it holds,
and on HTTP+JSON nothing the 0.3 proto lacks (a2a-sdk 0.3's server parses it strictly and
answers one unknown field with HTTP 500: the task could never be delivered). And what a
0.3 agent answers must read back whole: an empty file is a file.

The fast tests check the shapes against the 0.3 definitions themselves (the proto and the
pydantic models that ship with a2a-sdk); the slow ones send to a real a2a-sdk 0.3.26 agent
(``tests/support/echo03_agent.py``) that records what it parsed.
"""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from a2a.compat.v0_3 import a2a_v0_3_pb2 as pb03
from a2a.compat.v0_3 import types as types03
from google.protobuf.json_format import ParseDict

from a2a.face.legacy import message_out
from a2a.face.serializers import part_json
from a2a.states import TaskState
from a2a.transports.base import send_params
from a2a.transports.jsonrpc import JsonRpcTransport
from a2a.transports.rest import RestTransport
from a2a.transports.shapes import message_to_03, part_from_03, part_to_03
from agent_profiles.interfaces import CallTarget
from tests.support.legacy_sdk import legacy_python
from tests.support.serving import free_port

TEXT = {"text": "hello", "metadata": {"lang": "en"}}
FILE = {"raw": "aGVsbG8=", "mediaType": "text/plain", "filename": "hello.txt"}
# A push config as the worker sends it with a message (its configuration goes too).
PUSH = {
    "id": "p-1",
    "url": "https://platform.example/api/a2a/push/t/a/1",
    "token": "secret-token",
    "authentication": {"scheme": "Bearer", "credentials": "c"},
}


def full_message(**extra: Any) -> dict[str, Any]:
    """A 1.0 message with every kind of part and every Message field 1.0 has."""
    return {
        "messageId": "m-1",
        "contextId": "ctx-1",
        "role": "ROLE_USER",
        "metadata": {"skillId": "echo"},
        "extensions": ["https://example.com/ext"],
        "referenceTaskIds": ["earlier-task"],
        "parts": [
            TEXT,
            {"data": {"product": "lamp"}, "metadata": {"source": "form"}},
            FILE,
            {"url": "https://example.com/a.pdf", "filename": "a.pdf"},
            {"data": ["lamp", "kettle"]},
            {"data": 7},
        ],
        **extra,
    }


# --- toward 0.3 agents: checked against the 0.3 definitions -----------------------------


def test_a_send_to_a_0_3_http_json_agent_parses_as_the_0_3_proto_strictly() -> None:
    """The whole body must parse as the 0.3 proto's SendMessageRequest, unknown fields
    refused as a2a-sdk 0.3's server refuses them: ``referenceTaskIds`` (no field in 0.3's
    Message) made every such send an HTTP 500; a non-object data part (0.3's DataPart is a
    Struct) too. The configuration (with a push config) is part of the body checked."""
    body = send_params(full_message(), blocking=False, v03=True, rest=True, push=PUSH)
    ParseDict(body, pb03.SendMessageRequest())  # raises ParseError on any unknown field
    assert "referenceTaskIds" not in body["message"]


def test_a_send_to_a_0_3_jsonrpc_agent_validates_as_the_0_3_models() -> None:
    """The JSON-RPC params must validate as 0.3's MessageSendParams: a data part holding a
    list or a number made a2a-sdk 0.3 refuse the whole send (-32602)."""
    params = send_params(full_message(), blocking=False, v03=True, rest=False, push=PUSH)
    parsed = types03.MessageSendParams.model_validate(params)
    assert parsed.message.reference_task_ids == ["earlier-task"]  # 0.3's JSON-RPC has them


def test_a_text_parts_metadata_goes_to_a_0_3_agent_on_both_bindings() -> None:
    """Every 0.3 part has ``metadata``; the JSON-RPC text part left it out."""
    assert part_to_03(TEXT, rest=False) == {"kind": "text", "text": "hello", **_meta(TEXT)}
    assert part_to_03(TEXT, rest=True) == {"text": "hello", **_meta(TEXT)}


def test_a_files_name_goes_to_a_0_3_agent_on_both_bindings() -> None:
    """The 0.3 proto's FilePart has ``name`` (and a2a-sdk 0.3 maps it): HTTP+JSON sends
    left the file name out."""
    assert part_to_03(FILE, rest=True)["file"] == {
        "fileWithBytes": "aGVsbG8=",
        "mimeType": "text/plain",
        "name": "hello.txt",
    }
    assert part_to_03(FILE, rest=False)["file"]["name"] == "hello.txt"


@pytest.mark.parametrize("value", [["lamp", "kettle"], 7, "lamp", None, True])
def test_a_data_part_that_is_not_an_object_goes_wrapped_as_the_face_shows_it(value: Any) -> None:
    """1.0 data is any JSON value, 0.3 data an object: a non-object goes as
    ``{"value": ...}``, the wrapping the face's 0.3 clients already see (one helper)."""
    part = {"data": value}
    wrapped = {"value": value}
    assert part_to_03(part, rest=False)["data"] == wrapped
    assert part_to_03(part, rest=True)["data"] == {"data": wrapped}
    assert message_out({"role": "ROLE_AGENT", "parts": [part]})["parts"][0]["data"] == wrapped
    # An object goes as it is; reading it back does not unwrap (the face does not either).
    assert part_to_03({"data": {"a": 1}}, rest=False)["data"] == {"a": 1}
    assert part_from_03({"kind": "data", "data": wrapped}, rest=False) == {"data": wrapped}


def test_a_message_to_a_0_3_http_json_agent_keeps_every_field_the_proto_has() -> None:
    """Only the fields the 0.3 proto lacks are left out, none of those it has."""
    sent = message_to_03(full_message(taskId="t-1"), rest=True)
    assert set(sent) == {
        "messageId",
        "contextId",
        "taskId",
        "role",
        "content",
        "metadata",
        "extensions",
    }


def _meta(part: dict[str, Any]) -> dict[str, Any]:
    return {"metadata": part["metadata"]}


# --- from 0.3 agents -------------------------------------------------------------------


# Files as 0.3 agents send them (JSON-RPC spelling), and the 1.0 part each must read as.
FILES_03: list[tuple[dict[str, Any], dict[str, Any]]] = [
    ({"bytes": "", "name": "empty.bin"}, {"raw": "", "filename": "empty.bin"}),
    ({"uri": ""}, {"url": ""}),
    ({"uri": "", "bytes": "aGk="}, {"raw": "aGk="}),  # an empty name beside content
    ({"uri": "https://x/a", "bytes": ""}, {"url": "https://x/a"}),
]


def test_an_empty_file_from_a_0_3_agent_stays_a_file() -> None:
    """``bytes: ""`` is an empty file; read by truth it became a 1.0 Part with no content
    (served to 0.3 clients as an empty *text* part). Presence decides, for ``uri`` too,
    in the transports' reader and in the face's (stored parts)."""
    for file, expected in FILES_03:
        jsonrpc = {"kind": "file", "file": file}
        spelled = {"bytes": "fileWithBytes", "uri": "fileWithUri"}
        rest = {"file": {spelled.get(k, k): v for k, v in file.items()}}
        for read in (
            part_from_03(jsonrpc, rest=False),
            part_from_03(rest, rest=True),
            part_json(jsonrpc),
        ):
            assert read == expected, file
            shown = message_out({"role": "ROLE_AGENT", "parts": [read]})["parts"][0]
            assert shown["kind"] == "file", file


# --- a real a2a-sdk 0.3.26 agent ------------------------------------------------------


class Echo03:
    """A running ``echo03_agent.py``: its binding, URL and what it recorded."""

    def __init__(self, binding: str, url: str, record: Path) -> None:
        self.binding, self.url, self.record = binding, url, record

    def transport(self) -> JsonRpcTransport | RestTransport:
        """The platform's 0.3 transport for this agent's binding."""
        rest = self.binding == "rest"
        target = CallTarget(
            agent_id="p", binding="HTTP+JSON" if rest else "JSONRPC", url=self.url, version="0.3"
        )
        return RestTransport(target) if rest else JsonRpcTransport(target)

    def received(self) -> list[dict[str, Any]]:
        return [json.loads(line) for line in self.record.read_text().splitlines()]


@pytest.fixture(params=["jsonrpc", "rest"])
def echo03(request: Any, tmp_path: Path, settings: Any) -> Iterator[Echo03]:
    """The echo agent on one binding, as a child process of the 0.3 environment."""
    settings.ALLOW_LOOPBACK_URLS = True
    port = free_port()
    record = tmp_path / "received.jsonl"
    record.write_text("")
    script = Path(__file__).parents[1] / "support" / "echo03_agent.py"
    process = subprocess.Popen(
        [str(legacy_python()), str(script), str(port), request.param, str(record)],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert process.stdout is not None
        assert process.stdout.readline().strip() == "ready"
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 20
        while True:
            try:
                httpx.get(url + "/.well-known/agent-card.json", timeout=1)
                break
            except httpx.HTTPError:
                assert time.monotonic() < deadline, "the 0.3 agent did not start"
                time.sleep(0.1)
        yield Echo03(request.param, url, record)
    finally:
        process.terminate()
        process.wait(10)


@pytest.mark.slow
def test_a_real_0_3_agent_gets_all_of_a_message(echo03: Echo03) -> None:
    """Sent to a2a-sdk 0.3.26 on either binding, the message goes through (no HTTP 500,
    no -32602) with everything 0.3 can carry: part metadata, the file's name, non-object
    data wrapped; and its answer (the parts echoed) reads back as they were sent."""
    reply = echo03.transport().send(full_message())
    assert reply.state == TaskState.COMPLETED
    [seen] = echo03.received()
    parts = seen["parts"]
    assert parts[0] == {"kind": "text", "text": "hello", "metadata": {"lang": "en"}}
    assert parts[1]["metadata"] == {"source": "form"}
    # a2a-sdk 0.3 hands its agent the file's bytes decoded over HTTP+JSON (the proto's
    # ``bytes``), as base64 over JSON-RPC; it sends them back base64 either way.
    content = "hello" if echo03.binding == "rest" else "aGVsbG8="
    assert parts[2]["file"] == {"bytes": content, "mimeType": "text/plain", "name": "hello.txt"}
    assert parts[3]["file"] == {"uri": "https://example.com/a.pdf", "name": "a.pdf"}
    assert parts[4]["data"] == {"value": ["lamp", "kettle"]}
    assert parts[5]["data"] == {"value": 7}
    assert seen["extensions"] == ["https://example.com/ext"]
    echoed = reply.task["artifacts"][0]["parts"]
    assert echoed[0] == TEXT
    assert echoed[2] == FILE
    assert echoed[4] == {"data": {"value": ["lamp", "kettle"]}}


@pytest.mark.slow
def test_a_real_0_3_agents_empty_file_reads_back_as_a_file(echo03: Echo03) -> None:
    """An empty file sent to a 0.3 agent and echoed back stays a file with no bytes."""
    empty = {"raw": "", "mediaType": "application/octet-stream", "filename": "empty.bin"}
    message = {"messageId": "m-2", "role": "ROLE_USER", "parts": [empty]}
    reply = echo03.transport().send(message)
    assert reply.state == TaskState.COMPLETED
    assert reply.task["artifacts"][0]["parts"] == [empty]
