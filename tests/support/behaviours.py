"""What the test agent of :mod:`tests.support.agents` does with a task: the behaviours its
docstring lists, chosen by ``input["behaviour"]`` (the message's data part, or a JSON
object in its first text part), as an a2a-sdk :class:`AgentExecutor`."""

from __future__ import annotations

import asyncio
import json
import uuid
from typing import TYPE_CHECKING, Any

from a2a.helpers import get_data_parts, get_message_text
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.tasks import TaskUpdater
from a2a.types import a2a_pb2 as pb
from google.protobuf.json_format import MessageToDict

if TYPE_CHECKING:
    from tests.support.agents import TestAgent

VALID_OUTPUT: dict[str, Any] = {"verdict": "pass"}
INVALID_OUTPUT: dict[str, Any] = {"verdict": "maybe"}


def _data_part(data: dict[str, Any]) -> pb.Part:
    part = pb.Part()
    part.data.struct_value.update(data)
    return part


def _text_part(text: str) -> pb.Part:
    return pb.Part(text=text)


def _input_of(message: pb.Message | None) -> dict[str, Any]:
    """The first dict data part of a message (the platform's skill input), else a JSON
    object in its first text part (clients that send text alone)."""
    if message is None:
        return {}
    for data in get_data_parts(list(message.parts)):
        if isinstance(data, dict):
            return data
    for part in message.parts:
        if part.HasField("text"):
            try:
                data = json.loads(part.text)
            except ValueError:
                return {}
            return data if isinstance(data, dict) else {}
    return {}


class BehaviourExecutor(AgentExecutor):
    """Does what ``input["behaviour"]`` says (see the module docstring)."""

    def __init__(self, agent: TestAgent) -> None:
        self.agent = agent

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        message = context.message
        task = context.current_task
        task_id = context.task_id or str(uuid.uuid4())
        context_id = context.context_id or str(uuid.uuid4())
        updater = TaskUpdater(event_queue, task_id, context_id)
        if task is not None and task.status.state in (
            pb.TaskState.TASK_STATE_INPUT_REQUIRED,
            pb.TaskState.TASK_STATE_AUTH_REQUIRED,
        ):
            # A reply to our question: finish with what the person said.
            first = self.agent.inputs.get(task_id, {})
            reply = _input_of(message) or get_message_text(message) if message else ""
            self.agent.replies.setdefault(task_id, []).append(message)
            output = {**first.get("output", VALID_OUTPUT), "answer": reply}
            await updater.add_artifact([_data_part(output)], name="result")
            await updater.complete()
            return
        data = _input_of(message)
        self.agent.inputs[task_id] = data
        if message is not None:
            self.agent.messages.append(MessageToDict(message))
        behaviour = str(data.get("behaviour", "complete"))
        await self._run(behaviour, data, task_id, context_id, message, updater, event_queue)

    async def _run(
        self,
        behaviour: str,
        data: dict[str, Any],
        task_id: str,
        context_id: str,
        message: pb.Message | None,
        updater: TaskUpdater,
        event_queue: EventQueue,
    ) -> None:
        output = data.get("output", VALID_OUTPUT)
        if behaviour == "message":
            reply = pb.Message(
                message_id=str(uuid.uuid4()),
                role=pb.Role.ROLE_AGENT,
                context_id=context_id,
                parts=[_data_part(output)],
            )
            await event_queue.enqueue_event(reply)
            return
        if behaviour == "slowsend":
            # Hold the send's HTTP request open (a worker killed now dies mid-send).
            await asyncio.sleep(float(data.get("seconds", 2)))
            behaviour = str(data.get("then", "complete"))
        if behaviour == "complete":
            # The whole answer as the first event: with returnImmediately the send's
            # response is already the finished task (one request per task).
            done = pb.Task(
                id=task_id,
                context_id=context_id,
                status=pb.TaskStatus(state=pb.TaskState.TASK_STATE_COMPLETED),
                artifacts=[pb.Artifact(artifact_id="result", parts=[_data_part(output)])],
                history=[message] if message is not None else [],
            )
            await event_queue.enqueue_event(done)
            return
        await event_queue.enqueue_event(
            pb.Task(
                id=task_id,
                context_id=context_id,
                status=pb.TaskStatus(state=pb.TaskState.TASK_STATE_SUBMITTED),
                history=[message] if message is not None else [],
            )
        )
        if behaviour == "invalid":
            await updater.add_artifact([_data_part(INVALID_OUTPUT)], name="result")
            await updater.complete()
        elif behaviour in ("ask", "auth"):
            question = updater.new_agent_message([_text_part("Which market: EU or UK?")])
            if behaviour == "ask":
                await updater.requires_input(question)
            else:
                await updater.requires_auth(question)
        elif behaviour == "fail":
            await updater.failed(updater.new_agent_message([_text_part("The agent broke.")]))
        elif behaviour == "reject":
            await updater.reject(updater.new_agent_message([_text_part("Not my kind of work.")]))
        elif behaviour == "slow":
            await updater.start_work()
            await asyncio.sleep(float(data.get("seconds", 2)))
            await updater.add_artifact([_data_part(output)], name="result")
            await updater.complete()
        elif behaviour == "held":
            await updater.start_work()
            # The agent serves in its own thread: look at the test's flag now and then.
            deadline = asyncio.get_running_loop().time() + float(data.get("seconds", 60))
            while not self.agent.released.is_set():
                if asyncio.get_running_loop().time() > deadline:
                    break
                await asyncio.sleep(0.05)
            await updater.add_artifact([_data_part(output)], name="result")
            await updater.complete()
        elif behaviour == "chunks":
            await updater.start_work()
            count, size = int(data.get("chunks", 10)), int(data.get("size", 1000))
            for i in range(count):
                await updater.add_artifact(
                    [_text_part(str(i % 10) * size)],
                    artifact_id="chunked",
                    append=i > 0,
                    last_chunk=i == count - 1,
                )
            await updater.add_artifact([_data_part(output)], name="result")
            await updater.complete()
        elif behaviour == "written":
            # As a language model answers: the result as JSON in a Markdown code block,
            # streamed in small chunks appended to one artifact.
            await updater.start_work()
            text = f"```json\n{json.dumps(output)}\n```"
            size = int(data.get("size", 7))
            pieces = [text[i : i + size] for i in range(0, len(text), size)]
            for i, piece in enumerate(pieces):
                await updater.add_artifact(
                    [_text_part(piece)],
                    artifact_id="answer",
                    append=i > 0,
                    last_chunk=i == len(pieces) - 1,
                )
            await updater.complete()
        elif behaviour == "said":
            said = updater.new_agent_message([_data_part(output)])
            await updater.start_work(message=said)
            await updater.complete()
        elif behaviour == "working":
            await updater.start_work()
            await asyncio.sleep(3600)
        elif behaviour == "crash":
            raise RuntimeError("the test agent crashed on purpose")
        else:
            await updater.failed(updater.new_agent_message([_text_part(f"unknown {behaviour}")]))

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        self.agent.canceled.append(context.task_id or "")
        updater = TaskUpdater(event_queue, context.task_id or "", context.context_id or "")
        await updater.cancel()
