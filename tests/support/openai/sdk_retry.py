"""A model server's rate limit reaches the SDK as OpenAI's own 429 with Retry-After, so that it
raises `RateLimitError` after backing off; its retries carry the request's Idempotency-Key, and
reach a turn stored once. Run by tests/openai_sdk_retry_after_a_503_is_stored_once.rs against a
`serve` whose model server is rate limiting.

Usage: sdk_retry.py BASE_URL TOKEN
Prints one JSON line: the conversation's id.
"""

import json
import sys

import openai
from openai import OpenAI

BASE, TOKEN = sys.argv[1], sys.argv[2]


def check(condition, message):
    if not condition:
        sys.exit(f"check failed: {message}")


client = OpenAI(base_url=f"{BASE}/v1", api_key=TOKEN, max_retries=2, timeout=30)
conv = client.conversations.create()
try:
    client.responses.create(
        model="m",
        input="are you there?",
        conversation=conv.id,
        extra_headers={"Idempotency-Key": "retry-after-503-0001"},
    )
    check(False, "a rate-limited turn answered 200")
except openai.RateLimitError as e:
    check(e.status_code == 429, f"status {e.status_code}")
    check(e.body["code"] == "model_rate_limited", f"body {e.body}")
    check(e.body["type"] == "rate_limit_error", f"type {e.body}")
    check(e.response.headers.get("retry-after") is not None, "Retry-After")
items = client.conversations.items.list(conv.id, order="asc")
texts = [i.content[0].text for i in items.data]
check(texts == ["are you there?"], f"the input is stored once: {texts}")
print(json.dumps({"conversation": conv.id}))
