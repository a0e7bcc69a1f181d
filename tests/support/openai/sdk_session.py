"""Drives `turnstile serve` with the official `openai` Python package, as a user of the SDK
would, and checks what it gets back. Run by tests/openai_sdk_*.rs.

Usage: sdk_session.py BASE_URL ALICE_TOKEN BOB_TOKEN
Exits non-zero with the failed check's message on stderr; on success prints one JSON line with
the ids the Rust test cross-checks (the conversation, its response ids).
"""

import json
import sys

import openai
from openai import OpenAI

BASE, ALICE, BOB = sys.argv[1], sys.argv[2], sys.argv[3]
MODEL = "turnstile-mock"


def check(condition, message):
    if not condition:
        sys.exit(f"check failed: {message}")


alice = OpenAI(base_url=f"{BASE}/v1", api_key=ALICE, max_retries=0, timeout=30)
bob = OpenAI(base_url=f"{BASE}/v1", api_key=BOB, max_retries=0, timeout=30)

# The models serve was started with.
models = [m.id for m in alice.models.list()]
check(models == [MODEL], f"models.list: {models}")

# A conversation with items and metadata; more items added without a turn.
conv = alice.conversations.create(
    items=[{"type": "message", "role": "user", "content": "my name is Ada"}],
    metadata={"topic": "intro"},
)
check(conv.id.startswith("conv_"), f"conversation id {conv.id}")
check(conv.metadata == {"topic": "intro"}, f"metadata {conv.metadata}")
added = alice.conversations.items.create(
    conv.id,
    items=[
        {"type": "message", "role": "assistant", "content": "hello Ada"},
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hi"}]},
    ],
)
check(len(added.data) == 2, f"items.create answered {added}")
check(added.data[0].role == "assistant", f"first added item {added.data[0]}")
updated = alice.conversations.update(conv.id, metadata={"topic": "greetings"})
check(updated.metadata == {"topic": "greetings"}, f"update: {updated.metadata}")
check(alice.conversations.retrieve(conv.id).metadata == {"topic": "greetings"}, "retrieve")

# A response, not streamed, in the conversation.
first = alice.responses.create(model=MODEL, input="first question", conversation=conv.id)
check(first.status == "completed", f"status {first.status}")
check(first.output_text, "an output text")
check(first.conversation.id == conv.id, f"conversation {first.conversation}")
check(first.usage is not None and first.usage.output_tokens > 0, f"usage {first.usage}")

# A streamed response: every documented event type, numbered in order.
events = list(
    alice.responses.create(model=MODEL, input="tell me more", conversation=conv.id, stream=True)
)
types = [e.type for e in events]
for kind in [
    "response.created",
    "response.in_progress",
    "response.output_item.added",
    "response.content_part.added",
    "response.output_text.delta",
    "response.output_text.done",
    "response.content_part.done",
    "response.output_item.done",
    "response.completed",
]:
    check(kind in types, f"{kind} missing from {types}")
check(types[0] == "response.created" and types[-1] == "response.completed", f"order {types}")
numbers = [e.sequence_number for e in events]
check(numbers == list(range(len(events))), f"sequence numbers {numbers}")
streamed = "".join(e.delta for e in events if e.type == "response.output_text.delta")
done = events[-1].response
check(streamed == done.output_text, f"deltas {streamed!r} vs {done.output_text!r}")
second_id = done.id

# Retrieve a response, and its input.
again = alice.responses.retrieve(first.id)
check(again.status == "completed" and again.output_text == first.output_text, f"{again}")
inputs = alice.responses.input_items.list(first.id)
check([i.content[0].text for i in inputs.data] == ["first question"], f"input items {inputs}")

# Cancel a response mid-stream: the partial output is kept, the stream ends incomplete.
stream = alice.responses.create(
    model=MODEL, input="a long answer please", conversation=conv.id, stream=True
)
seen = []
for event in stream:
    seen.append(event)
    if event.type == "response.output_text.delta":
        cancelled = alice.responses.cancel(seen[0].response.id)
        check(cancelled.status == "cancelled", f"cancel answered {cancelled.status}")
        break
rest = list(stream)
kinds = [e.type for e in seen + rest]
check(kinds[-1] == "response.incomplete", f"a cancelled stream ends with {kinds[-1]}: {kinds}")
partial = (seen + rest)[-1].response
check(partial.status in ("cancelled", "incomplete"), f"partial status {partial.status}")
kept = alice.responses.retrieve(partial.id)
check(kept.status == "cancelled", f"the stored cancelled response is {kept.status}")
check(kept.output_text == partial.output_text, "the partial output is kept")

# Continue from the newest response with previous_response_id: same conversation.
newest = alice.responses.create(model=MODEL, input="and then?", previous_response_id=partial.id)
check(newest.conversation.id == conv.id, f"continued in {newest.conversation.id}")
# From an older one: a fork, a new conversation.
forked = alice.responses.create(model=MODEL, input="back to it", previous_response_id=first.id)
check(forked.conversation.id != conv.id, "an older response continues in a fork")

# Items with paging: ascending pages of two, the SDK following `after`.
page = alice.conversations.items.list(conv.id, limit=2, order="asc")
check(len(page.data) == 2 and page.has_more, f"first page {page}")
every = [item.id for item in alice.conversations.items.list(conv.id, limit=2, order="asc")]
check(len(every) == len(set(every)), f"no item twice: {every}")
check(len(every) == 11, f"11 items (3 added, 4 responses of two each): {every}")
newest_first = [i.id for i in alice.conversations.items.list(conv.id, limit=100)]
check(newest_first == list(reversed(every)), "desc is asc reversed")
item = alice.conversations.items.retrieve(every[0], conversation_id=conv.id)
check(item.role == "user" and item.content[0].text == "my name is Ada", f"item {item}")
try:
    alice.conversations.items.delete(every[0], conversation_id=conv.id)
    check(False, "an item delete was accepted")
except openai.ConflictError as e:
    check(e.body["code"] == "append_only", f"delete refused with {e.body}")

# Chat completions, streamed and not, stateless and on a session.
plain = alice.chat.completions.create(
    model=MODEL, messages=[{"role": "user", "content": "hello there"}]
)
check(plain.choices[0].message.content, "a chat completion")
check(plain.choices[0].finish_reason == "stop", f"finish {plain.choices[0].finish_reason}")
# This server's mock agent does not act on instructions: a system message is refused, naming
# the field, rather than accepted and ignored (serve --agent openai acts on it).
try:
    alice.chat.completions.create(
        model=MODEL,
        messages=[{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi"}],
    )
    check(False, "a system message the agent would ignore was accepted")
except openai.BadRequestError as e:
    check(e.body["param"] == "messages", f"refused naming {e.body}")
chunks = list(
    alice.chat.completions.create(
        model=MODEL,
        messages=[{"role": "user", "content": "hi"}],
        stream=True,
        stream_options={"include_usage": True},
        extra_headers={"X-Session-Id": conv.id},
    )
)
text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
check(text, "streamed chat text")
check(chunks[-1].usage is not None and chunks[-1].usage.completion_tokens > 0, "usage chunk")
after_chat = [i.id for i in alice.conversations.items.list(conv.id, limit=100, order="asc")]
check(len(after_chat) == len(every) + 2, "a chat on a session is a turn of it")

# Errors in OpenAI's shape, with the documented statuses.
try:
    alice.conversations.create(metadata={f"k{i}": "v" for i in range(17)})
    check(False, "17 metadata pairs were accepted")
except openai.BadRequestError as e:
    check(e.body["type"] == "invalid_request_error", f"type {e.body}")
    check(e.body["param"] == "metadata", f"param {e.body}")
try:
    OpenAI(base_url=f"{BASE}/v1", api_key="not-a-token-at-all", max_retries=0).models.list()
    check(False, "a bad token was accepted")
except openai.AuthenticationError as e:
    check(e.body["type"] == "authentication_error", f"401 body {e.body}")

# User isolation: bob's token on alice's conversation and responses never returns data.
for attempt in [
    lambda: bob.conversations.retrieve(conv.id),
    lambda: bob.conversations.items.list(conv.id),
    lambda: bob.responses.retrieve(first.id),
    lambda: bob.responses.input_items.list(first.id),
    lambda: bob.responses.create(model=MODEL, input="x", conversation=conv.id),
    lambda: bob.responses.create(model=MODEL, input="x", previous_response_id=first.id),
    lambda: bob.conversations.delete(conv.id),
]:
    try:
        leaked = attempt()
        check(False, f"bob read alice's data: {leaked}")
    except openai.NotFoundError as e:
        check(e.body["type"] == "not_found_error", f"404 body {e.body}")
check(alice.conversations.retrieve(conv.id).id == conv.id, "alice's conversation is intact")

# Idempotency-Key: a retried create is answered with the first attempt's response, stored once.
key = {"Idempotency-Key": "sdk-retry-0001"}
one = alice.responses.create(model=MODEL, input="once", conversation=conv.id, extra_headers=key)
two = alice.responses.create(model=MODEL, input="once", conversation=conv.id, extra_headers=key)
check(one.id == two.id and one.output_text == two.output_text, f"{one.id} vs {two.id}")
final = [i.id for i in alice.conversations.items.list(conv.id, limit=100, order="asc")]
check(len(final) == len(after_chat) + 2, "the retried response is stored once")

print(json.dumps({"conversation": conv.id, "first": first.id, "forked": forked.conversation.id}))
