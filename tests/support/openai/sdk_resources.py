"""A response is a resource from its creation, as the official `openai` Python package expects:
retrieved while it runs (`in_progress`), cancelled after the streaming client went away (its
partial output kept), run in the background and polled to its end; a function tool the client
declares comes back as a `function_call` output item that a `function_call_output` continues;
and every stateless chat completion carries its usage. Run by
tests/openai_sdk_responses_are_resources_and_tools_round_trip.rs against a scripted model
server.

Usage: sdk_resources.py BASE_URL TOKEN
Prints one JSON line: the ids the Rust test looks at.
"""

import json
import sys
import time

import openai
from openai import OpenAI

BASE, TOKEN = sys.argv[1], sys.argv[2]


def check(condition, message):
    if not condition:
        sys.exit(f"check failed: {message}")


client = OpenAI(base_url=f"{BASE}/v1", api_key=TOKEN, max_retries=0, timeout=30)

# A streamed response whose client goes away after its first delta: still a resource.
stream = client.responses.create(model="m", input="tell me a long story", stream=True)
response_id = None
for event in stream:
    if event.type == "response.created":
        response_id = event.response.id
    if event.type == "response.output_text.delta":
        break
stream.close()
check(response_id, "the stream named its response")
running = client.responses.retrieve(response_id)
check(running.status == "in_progress", f"retrieved while it runs: {running.status}")
cancelled = client.responses.cancel(response_id)
check(cancelled.status == "cancelled", f"cancel answered {cancelled.status}")
partial = cancelled.output_text
check(partial and len(partial) < len("word " * 20), f"the partial output: {partial!r}")
kept = client.responses.retrieve(response_id)
check(kept.output_text == partial, f"kept {kept.output_text!r} vs {partial!r}")
check(kept.status == "cancelled", f"read back from the log: {kept.status}")

# A function tool the client runs.
tools = [
    {
        "type": "function",
        "name": "add",
        "description": "Adds two numbers.",
        "parameters": {
            "type": "object",
            "properties": {"a": {"type": "number"}, "b": {"type": "number"}},
            "required": ["a", "b"],
        },
    }
]
asked = client.responses.create(model="m", input="what is 2+3?", tools=tools)
check(asked.status == "completed", f"a response that calls a tool is {asked.status}")
calls = [item for item in asked.output if item.type == "function_call"]
check(len(calls) == 1 and calls[0].name == "add", f"output {asked.output}")
check(json.loads(calls[0].arguments) == {"a": 2, "b": 3}, f"arguments {calls[0].arguments}")
try:
    client.responses.create(
        model="m",
        previous_response_id=asked.id,
        input=[{"type": "function_call_output", "call_id": "call_nope", "output": "5"}],
        tools=tools,
    )
    check(False, "an output for no call was accepted")
except openai.BadRequestError as e:
    check(e.body["param"] == "input", f"refused naming {e.body}")
answered = client.responses.create(
    model="m",
    previous_response_id=asked.id,
    input=[{"type": "function_call_output", "call_id": calls[0].call_id, "output": "5"}],
    tools=tools,
)
check(answered.output_text == "5, it is", f"after the tool: {answered.output_text!r}")
check(answered.conversation.id == asked.conversation.id, "continued in place")

# In the background: answered at once, then polled.
background = client.responses.create(model="m", input="in the background", background=True)
check(background.status in ("queued", "in_progress"), f"created {background.status}")
deadline = time.monotonic() + 20
polled = background
while polled.status in ("queued", "in_progress") and time.monotonic() < deadline:
    time.sleep(0.05)
    polled = client.responses.retrieve(background.id)
check(polled.status == "completed", f"polled to {polled.status}")
check(polled.output_text == "done in the background", f"{polled.output_text!r}")

# Stateless chat completions: every one carries its usage.
for n in range(200):
    completion = client.chat.completions.create(
        model="m", messages=[{"role": "user", "content": f"count {n}"}]
    )
    usage = completion.usage
    check(usage is not None and usage.total_tokens > 0, f"completion {n}: usage {usage}")

print(json.dumps({"cancelled": response_id, "tool": asked.id, "background": background.id}))
