"""The LangGraph test agent's graph (run by LangGraph's own server, ``langgraph dev``, in
its environment; see :mod:`tests.support.langgraph_agent`). No LLM: the message's data
part is the graph's input, and ``behaviour`` picks what it does. Its answer is the JSON
of the result as the last AI message, as a LangGraph agent's final answer is."""

from __future__ import annotations

import asyncio
import json
from typing import Annotated, Any

from langchain_core.messages import AIMessage
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.types import interrupt
from typing_extensions import TypedDict


class State(TypedDict, total=False):
    messages: Annotated[list[Any], add_messages]
    product: str
    behaviour: str
    seconds: float


async def work(state: State) -> dict[str, Any]:
    """``complete``; ``slow`` (``seconds``, then complete); ``ask`` (interrupts with a
    question, completes with the answer); ``fail`` (raises)."""
    behaviour = state.get("behaviour", "complete")
    result: dict[str, Any] = {"verdict": "pass"}
    if behaviour == "fail":
        raise RuntimeError("the agent's code failed")
    if behaviour == "slow":
        await asyncio.sleep(float(state.get("seconds", 1)))
    if behaviour == "ask":
        result["answer"] = interrupt("Which market: EU or UK?")
    return {"messages": [AIMessage(content=json.dumps(result))]}


builder = StateGraph(State)
builder.add_node("work", work)
builder.add_edge(START, "work")
builder.add_edge("work", END)
graph = builder.compile()
