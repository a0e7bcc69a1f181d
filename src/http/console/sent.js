// The inspector's "Requests sent to the model" of a turn: read when first opened from
// `…/turns/{seq}/model-requests` (docs/http-api.md), which the process that ran the turn keeps
// in memory for a while; drawn as the messages and tools the model was given, the other
// options, and the whole JSON. Text only, bidi controls written out.
"use strict";

TS.sentRequests = (() => {
  const { api, el, visible } = TS;
  /** Characters of one message's content shown in the list (the JSON below has it whole). */
  const MAX_CONTENT_CHARS = 2000;
  /** Characters of a request's JSON shown before it is cut. */
  const MAX_JSON_CHARS = 200000;

  /** A `<details>` that reads and shows the requests of the turn ending at `seq` of the
   *  session at `base` (its API path) when first opened. */
  function section(base, seq) {
    const body = el("div", { class: "sent-requests-body" });
    const box = el("details", { class: "sent-requests", "data-seq": String(seq) },
      el("summary", {}, "Requests sent to the model"), body);
    // Read when opened until a read succeeds: a refusal or a failed read is tried again the
    // next time it is opened.
    box.addEventListener("toggle", () => {
      if (!box.open || box.dataset.state === "loaded" || box.dataset.state === "loading") return;
      box.dataset.state = "loading";
      body.replaceChildren(el("p", { class: "hint" }, "loading…"));
      api("GET", base + "/turns/" + seq + "/model-requests")
        .then((answer) => {
          box.dataset.state = "loaded";
          body.replaceChildren(...answer.requests.map(request));
        })
        .catch((err) => {
          box.dataset.state = "failed";
          body.replaceChildren(el("p", { class: "hint", role: "status" }, refusal(err)));
        });
    });
    return box;
  }

  function refusal(err) {
    if (err.status === 403) return "Reading what was sent to the model needs an admin token (it holds the system prompt and the tools).";
    return err.message;
  }

  function request(r) {
    const parts = [
      el("h3", { class: "sent-title" }, "Request " + r.round + ": " + r.method + " " + visible(r.url)),
      el("p", { class: "hint" }, r.headers.map((h) => visible(h.name) + ": " + visible(h.value)).join(" · ")),
    ];
    const b = r.body;
    if (b && typeof b === "object" && !Array.isArray(b)) {
      const options = Object.keys(b).filter((k) => k !== "messages" && k !== "tools")
        .map((k) => k + " = " + visible(JSON.stringify(b[k])));
      if (options.length) parts.push(el("p", { class: "sent-options" }, options.join(" · ")));
      if (Array.isArray(b.messages)) {
        parts.push(el("p", {}, b.messages.length + " message" + (b.messages.length === 1 ? "" : "s") + ":"),
          el("ol", { class: "sent-messages" }, ...b.messages.map(message)));
      }
      if (Array.isArray(b.tools) && b.tools.length) {
        const names = b.tools.map((t) => visible(String((t.function && t.function.name) || t.type || "?")));
        parts.push(el("p", { class: "sent-tools" }, b.tools.length + " tool" + (b.tools.length === 1 ? "" : "s") + ": " + names.join(", ")));
      }
    }
    let json = typeof b === "string" ? b : JSON.stringify(b, null, 2);
    if (json.length > MAX_JSON_CHARS) json = json.slice(0, MAX_JSON_CHARS) + "\n… (cut here; the API has it whole)";
    const note = r.truncated ? " (only its start was kept: it had " + r.body_bytes + " bytes)" : " (" + r.body_bytes + " bytes)";
    parts.push(el("details", {}, el("summary", {}, "The whole request" + note),
      el("pre", { class: "json", tabIndex: 0 }, visible(json))));
    return el("section", { class: "sent-request", "data-round": String(r.round) }, ...parts);
  }

  function message(m) {
    let content = m.content;
    if (Array.isArray(content)) content = content.map((p) => (p && p.text) || JSON.stringify(p)).join("\n");
    else if (content == null) content = "";
    else if (typeof content !== "string") content = JSON.stringify(content);
    if (content.length > MAX_CONTENT_CHARS) content = content.slice(0, MAX_CONTENT_CHARS) + " …";
    const calls = Array.isArray(m.tool_calls)
      ? m.tool_calls.map((c) => " [calls " + String((c.function && c.function.name) || "?") + "]").join("")
      : "";
    const of = m.tool_call_id ? " (result of " + String(m.tool_call_id) + ")" : "";
    return el("li", { "data-role": String(m.role) }, el("strong", {}, visible(String(m.role) + of) + ": "), visible(content + calls));
  }

  return section;
})();
