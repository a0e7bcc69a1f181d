"""Drives three `turnstile serve --cluster` processes with the official `openai` Python package,
one client per process, as an application behind a load balancer without affinity would.
Run by tests/openai_sdk_reaches_the_owner_in_a_three_process_cluster.rs.

Usage: sdk_cluster.py BASE_A BASE_B BASE_C
Exits non-zero with the failed check's message on stderr; on success prints one JSON line with
the conversation and the retried response's conversation, which the Rust test reads back.
"""

import json
import sys

from openai import OpenAI

BASES = sys.argv[1:4]
MODEL = "turnstile-mock"
SERVED_BY = "x-turnstile-served-by"


def check(condition, message):
    if not condition:
        sys.exit(f"check failed: {message}")


# The gateways have no tokens (loopback): any key is taken, and the conversations are the
# default user's.
a, b, c = (OpenAI(base_url=f"{base}/v1", api_key="unused", max_retries=0, timeout=30) for base in BASES)

conv = a.conversations.create()
# The first response takes the session where it lands; the others reach it there.
owner = None
texts = []
for i, client in enumerate([a, b, c, b, c]):
    raw = client.responses.with_raw_response.create(model=MODEL, input=f"m{i}", conversation=conv.id)
    served_by = raw.headers.get(SERVED_BY)
    owner = owner or served_by
    check(served_by == owner, f"response {i} served by {served_by}, the owner is {owner}")
    texts.append(raw.parse().output_text)
check(owner == BASES[0], f"the owner is {owner}")
check(all(f"m{i}" in t for i, t in enumerate(texts)), f"each reply answers its input: {texts}")

# Listed through another process, in order.
items = c.conversations.items.list(conv.id, order="asc", limit=20)
said = [i.content[0].text for i in items.data if i.role == "user"]
check(said == [f"m{i}" for i in range(5)], f"items through c: {said}")

# A response streamed through b and cancelled through c: the cancel reaches the owner.
stream = b.responses.create(model=MODEL, input="a long answer", conversation=conv.id, stream=True)
seen = []
for event in stream:
    seen.append(event)
    if event.type == "response.output_text.delta":
        cancelled = c.responses.cancel(seen[0].response.id)
        check(cancelled.status == "cancelled", f"cancel through c answered {cancelled.status}")
        break
rest = list(stream)
kinds = [e.type for e in seen + rest]
check(kinds[-1] == "response.incomplete", f"the cancelled stream ends with {kinds[-1]}")
kept = b.responses.retrieve(seen[0].response.id)
check(kept.status == "cancelled", f"the stored cancelled response is {kept.status}")

# The SDK's retry header through every process: one response, one stored turn.
retried = [
    client.responses.create(model=MODEL, input="pay once", extra_headers={"Idempotency-Key": "pay-1"})
    for client in (c, a, b)
]
check(len({r.id for r in retried}) == 1, f"one response: {[r.id for r in retried]}")

print(json.dumps({"conversation": conv.id, "retried": retried[0].conversation.id}))
