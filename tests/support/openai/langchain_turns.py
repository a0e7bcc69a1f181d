"""LangChain's `ChatOpenAI(use_responses_api=True)`, pointed at `turnstile serve`, holds a
conversation the way LangChain users hold one: the client keeps the history and sends it whole
with every turn (earlier assistant messages among it), binds a tool that it runs itself
(`bind_tools`: the model's call comes back as a tool call, the script runs the tool and sends
its result), and asks for structured output (`with_structured_output`, a JSON schema). Run by
tests/openai_langchain_holds_a_conversation_with_a_tool.rs against a scripted model server.

Usage: langchain_turns.py BASE_URL TOKEN
Prints one JSON line: the answers, in order.
"""

import json
import sys

from langchain_core.messages import HumanMessage, ToolMessage
from langchain_core.tools import tool
from langchain_openai import ChatOpenAI
from pydantic import BaseModel

BASE, TOKEN = sys.argv[1], sys.argv[2]


def check(condition, message):
    if not condition:
        sys.exit(f"check failed: {message}")


@tool
def add(a: int, b: int) -> int:
    """Adds two numbers."""
    return a + b


class Person(BaseModel):
    name: str


llm = ChatOpenAI(
    model="m", base_url=f"{BASE}/v1", api_key=TOKEN, use_responses_api=True, max_retries=0
)
history = [HumanMessage("hi, I am Ada")]
first = llm.invoke(history)
check(first.text == "hello Ada", f"first answer {first.text!r}")
history += [first, HumanMessage("what is my name?")]
second = llm.invoke(history)
check(second.text == "you are Ada", f"second answer {second.text!r}")

# A tool the client runs: the model's call comes back, the client answers it.
with_tools = llm.bind_tools([add])
history += [second, HumanMessage("what is 2+3?")]
asked = with_tools.invoke(history)
check(len(asked.tool_calls) == 1, f"one tool call: {asked}")
call = asked.tool_calls[0]
check(call["name"] == "add" and call["args"] == {"a": 2, "b": 3}, f"the call {call}")
result = add.invoke(call["args"])
history += [asked, ToolMessage(str(result), tool_call_id=call["id"])]
third = with_tools.invoke(history)
check(third.text == "2+3 is 5", f"third answer {third.text!r}")

# Structured output: the schema reaches the model, the answer parses into it.
person = llm.with_structured_output(Person).invoke("who am I, as JSON?")
check(isinstance(person, Person) and person.name == "Ada", f"structured {person!r}")

print(json.dumps({"answers": [first.text, second.text, third.text, person.name]}))
