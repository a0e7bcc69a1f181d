"""The OpenAI Agents SDK, pointed at `turnstile serve`, runs an agent over three turns of a
`SQLiteSession` (the SDK keeps the history and sends it whole with every turn, earlier
assistant messages, tool calls and their outputs among it), with one function tool that the
SDK runs itself. Run by tests/openai_agents_sdk_holds_a_session_with_a_tool.rs against a
scripted model server.

Usage: agents_turns.py BASE_URL TOKEN
Prints one JSON line: the answers, in order, and how often the tool ran.
"""

import asyncio
import json
import sys

from agents import (
    Agent,
    OpenAIResponsesModel,
    Runner,
    SQLiteSession,
    function_tool,
    set_tracing_disabled,
)
from openai import AsyncOpenAI

BASE, TOKEN = sys.argv[1], sys.argv[2]
ran = []


def check(condition, message):
    if not condition:
        sys.exit(f"check failed: {message}")


@function_tool
def add(a: int, b: int) -> int:
    """Adds two numbers."""
    ran.append((a, b))
    return a + b


async def main():
    set_tracing_disabled(True)
    client = AsyncOpenAI(base_url=f"{BASE}/v1", api_key=TOKEN, max_retries=0)
    model = OpenAIResponsesModel(model="m", openai_client=client)
    agent = Agent(name="adder", instructions="be brief", model=model, tools=[add])
    session = SQLiteSession("turnstile-test")
    answers = []
    for said in ["hi, I am Ada", "what is 2+3?", "thanks"]:
        result = await Runner.run(agent, said, session=session)
        answers.append(result.final_output)
    check(answers == ["hello Ada", "2+3 is 5", "you are welcome"], f"answers {answers}")
    check(ran == [(2, 3)], f"the tool ran once, here: {ran}")
    print(json.dumps({"answers": answers, "ran": len(ran)}))


asyncio.run(main())
