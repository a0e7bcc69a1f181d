// Drives `turnstile serve` with the official `openai` npm package, as a user of the Node SDK
// would, and checks what it gets back. Run by tests/openai_node_sdk_*.rs with NODE_PATH set to
// the global npm folder (where scripts/test.sh installs the package).
//
// Usage: node sdk_session.js BASE_URL ALICE_TOKEN BOB_TOKEN
// Exits non-zero with the failed check's message on stderr; on success prints one JSON line with
// the ids the Rust test cross-checks.

"use strict";

const OpenAI = require("openai");

const [BASE, ALICE, BOB] = process.argv.slice(2);
const MODEL = "turnstile-mock";

function check(condition, message) {
  if (!condition) {
    console.error(`check failed: ${message}`);
    process.exit(1);
  }
}

async function main() {
  const options = { baseURL: `${BASE}/v1`, maxRetries: 0, timeout: 30_000 };
  const alice = new OpenAI({ ...options, apiKey: ALICE });
  const bob = new OpenAI({ ...options, apiKey: BOB });

  // The models serve was started with, through the SDK's auto-paging.
  const models = [];
  for await (const model of alice.models.list()) models.push(model.id);
  check(JSON.stringify(models) === JSON.stringify([MODEL]), `models.list: ${models}`);

  // A conversation with an item and metadata.
  const conv = await alice.conversations.create({
    items: [{ type: "message", role: "user", content: "my name is Ada" }],
    metadata: { topic: "intro" },
  });
  check(conv.id.startsWith("conv_"), `conversation id ${conv.id}`);
  check(conv.metadata.topic === "intro", `metadata ${JSON.stringify(conv.metadata)}`);

  // A response, not streamed.
  const first = await alice.responses.create({
    model: MODEL,
    input: "first question",
    conversation: conv.id,
  });
  check(first.status === "completed", `status ${first.status}`);
  check(first.output_text.length > 0, "an output text");
  check(first.usage && first.usage.output_tokens > 0, `usage ${JSON.stringify(first.usage)}`);

  // A streamed response: the typed events, numbered in order, their deltas the final text.
  const stream = await alice.responses.create({
    model: MODEL,
    input: "tell me more",
    conversation: conv.id,
    stream: true,
  });
  const events = [];
  for await (const event of stream) events.push(event);
  const types = events.map((e) => e.type);
  for (const kind of [
    "response.created",
    "response.in_progress",
    "response.output_item.added",
    "response.content_part.added",
    "response.output_text.delta",
    "response.output_text.done",
    "response.content_part.done",
    "response.output_item.done",
    "response.completed",
  ]) {
    check(types.includes(kind), `${kind} missing from ${types}`);
  }
  check(types[0] === "response.created" && types.at(-1) === "response.completed", `order ${types}`);
  const numbers = events.map((e) => e.sequence_number);
  check(numbers.every((n, i) => n === i), `sequence numbers ${numbers}`);
  const streamed = events
    .filter((e) => e.type === "response.output_text.delta")
    .map((e) => e.delta)
    .join("");
  const done = events.at(-1).response;
  // A streamed event's response is the wire object: its text is in `output` (the SDK adds
  // `output_text` only to what `create` and the stream helper return).
  const doneText = done.output
    .flatMap((item) => item.content || [])
    .filter((part) => part.type === "output_text")
    .map((part) => part.text)
    .join("");
  check(streamed === doneText, `deltas ${streamed} vs ${doneText}`);

  // The SDK's stream helper gives the same final response.
  const helper = alice.responses.stream({ model: MODEL, input: "once more", conversation: conv.id });
  const final = await helper.finalResponse();
  check(final.status === "completed" && final.output_text.length > 0, `stream helper ${final.status}`);

  // Retrieved as stored; its input items paged.
  const again = await alice.responses.retrieve(first.id);
  check(again.id === first.id && again.output_text === first.output_text, "retrieve");
  check(again.output_text === first.output_text, `retrieved text ${again.output_text}`);
  const inputs = [];
  for await (const item of alice.responses.inputItems.list(first.id)) inputs.push(item);
  check(inputs.length >= 1, `input items ${JSON.stringify(inputs)}`);

  // Continued from a response that is no longer the conversation's newest (the stream helper's
  // came after it): a fork, in a conversation of its own (docs/openai-api.md).
  const next = await alice.responses.create({
    model: MODEL,
    input: "and then?",
    previous_response_id: done.id,
  });
  check(next.status === "completed", `previous_response_id: ${next.status}`);
  check(
    next.conversation && next.conversation.id !== conv.id,
    `a fork has its own conversation: ${JSON.stringify(next.conversation)}`,
  );

  // The conversation's items, newest first, paged by the SDK.
  const items = [];
  for await (const item of alice.conversations.items.list(conv.id, { limit: 2, order: "desc" })) {
    items.push(item);
  }
  // The first item, then three turns of two items each; the fork added none here.
  check(items.length === 7, `items of the conversation: ${items.length}`);
  check(items[0].role === "assistant" && items.at(-1).role === "user", "newest first");

  // Chat completions, plain and streamed with usage.
  const chat = await alice.chat.completions.create(
    { model: MODEL, messages: [{ role: "user", content: "hello there" }] },
    { headers: { "X-Session-Id": "node-chat" } },
  );
  check(chat.choices[0].message.content.length > 0, "a chat answer");
  const chunks = [];
  const chatStream = await alice.chat.completions.create(
    {
      model: MODEL,
      messages: [{ role: "user", content: "stream it" }],
      stream: true,
      stream_options: { include_usage: true },
    },
    { headers: { "X-Session-Id": "node-chat" } },
  );
  for await (const chunk of chatStream) chunks.push(chunk);
  check(chunks.some((c) => c.usage && c.usage.completion_tokens > 0), "usage in the last chunk");
  const text = chunks.map((c) => (c.choices[0] && c.choices[0].delta.content) || "").join("");
  check(text.length > 0, "streamed chat text");

  // Errors in OpenAI's shape, typed by the SDK: bob does not see alice's conversation; a bad
  // token is refused.
  try {
    await bob.conversations.retrieve(conv.id);
    check(false, "bob read alice's conversation");
  } catch (e) {
    check(e instanceof OpenAI.NotFoundError, `bob's error: ${e.constructor.name} ${e.message}`);
  }
  try {
    await new OpenAI({ ...options, apiKey: "not-a-token" }).models.list();
    check(false, "a bad token was accepted");
  } catch (e) {
    check(e instanceof OpenAI.AuthenticationError, `bad token: ${e.constructor.name} ${e.message}`);
  }

  console.log(
    JSON.stringify({
      conversation: conv.id,
      fork: next.conversation.id,
      responses: [first.id, done.id, next.id],
    }),
  );
}

main().catch((e) => {
  console.error(e && e.stack ? e.stack : String(e));
  process.exit(1);
});
