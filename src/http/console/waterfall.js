// The inspector's turn timing: a page of events cut into turns (each from a user input) and
// drawn as small waterfalls on one time scale, from the timing record on each turn's last
// event (docs/http-api.md, `…/turns/{seq}`). Every bar is labelled with its phase and
// milliseconds, so the figures read without the picture.
"use strict";

TS.waterfalls = (() => {
  const { el, visible } = TS;

  /** `events` (in order) as turns drawn on one scale: `{ scale, turns }`, each turn an `<li>`;
   *  a turn that asked its model offers what it sent, read from the session at `base` (its API
   *  path) when opened. */
  function waterfalls(events, base) {
    const turns = [];
    for (const event of events) {
      if (event.kind.type === "user_input" || !turns.length) turns.push([]);
      turns[turns.length - 1].push(event);
    }
    const drawn = turns.filter((t) => t.length > 1);
    const scale = Math.max(1, ...drawn.map(spanOf));
    return { scale, turns: drawn.map((t) => waterfall(t, scale, base)) };
  }

  /** How long a turn took, in ms: from its message's arrival to its end. */
  function spanOf(events) {
    const end = events.find((e) => e.timing);
    if (end) return Math.max(1, end.timing.queued_ms + (end.kind.duration_ms || 0));
    return Math.max(1, Math.max(...events.map((e) => e.at_ms)) - events[0].at_ms);
  }

  function waterfall(events, scale, base) {
    const end = events.find((e) => e.timing);
    return end ? measured(events, end, scale, base) : unmeasured(events, scale);
  }

  /** One bar of a waterfall: `start` and `length` in ms on a track of `span` ms. */
  function bar(label, start, length, span, kind, seq) {
    const shown = el("span", { class: "wf-bar " + kind });
    // Set through the CSSOM, which the page's CSP allows (a style attribute it would not).
    shown.style.marginLeft = (start / span) * 100 + "%";
    shown.style.width = Math.max(0.5, (length / span) * 100) + "%";
    return el("li", { "data-seq": String(seq) }, el("span", { class: "bar-label" }, label + ": " + length + " ms"),
      el("span", { class: "track" }, shown));
  }

  /**
   * A turn whose last event carries its timing record (see docs/http-api.md): each phase where
   * it ran, from the moment its message was taken in. Phases that took no time are left out,
   * except the wait in the queue and the agent.
   */
  function measured(events, end, scale, base) {
    const t = end.timing;
    const took = spanOf(events);
    const span = Math.max(took, scale);
    const agentAt = t.queued_ms + t.permit_ms + t.recall_ms;
    const bars = [bar("queued", 0, t.queued_ms, span, "queued", end.seq)];
    if (t.load_ms != null) bars.push(bar("loading the session", 0, t.load_ms, span, "load", end.seq));
    if (t.permit_ms) bars.push(bar("waiting for a turn permit", t.queued_ms, t.permit_ms, span, "queued", end.seq));
    if (t.recall_ms) bars.push(bar("memory recall", t.queued_ms + t.permit_ms, t.recall_ms, span, "recall", end.seq));
    bars.push(bar("agent", agentAt, t.agent_ms, span, "agent_output", end.seq));
    if (t.first_chunk_ms != null) bars.push(bar("first chunk streamed", agentAt, t.first_chunk_ms, span, "first_chunk", end.seq));
    // Each request to the model, retries included: its status and when its answer began.
    const requests = t.model_requests || [];
    for (const r of requests) {
      const ok = r.status != null && r.status >= 200 && r.status < 300;
      const answer = r.status == null ? "no answer" : String(r.status);
      const first = r.first_byte_ms == null ? "" : ", first byte at " + (r.first_byte_ms - r.start_ms) + " ms";
      const label = "model request " + r.round + (r.attempt > 1 ? ", try " + r.attempt : "") + " (" + answer + first + ")";
      bars.push(bar(label, agentAt + r.start_ms, Math.max(0, r.end_ms - r.start_ms), span, ok ? "model" : "model failed", end.seq));
    }
    const calls = events.filter((e) => e.kind.type === "tool_call");
    calls.forEach((call, i) => {
      const result = events.find((e) => e.kind.type === "tool_result" && e.kind.call_id === call.kind.call_id);
      const start = (t.tool_start_ms || [])[i] || 0;
      const length = result && typeof result.kind.duration_ms === "number" ? result.kind.duration_ms : 0;
      bars.push(bar("tool " + visible(call.kind.name), agentAt + start, length, span, "tool_call", call.seq));
    });
    const status = end.kind.type === "turn_failed" ? "failed: " + end.kind.code : end.kind.status.status;
    const retried = requests.filter((r) => r.attempt > 1).length;
    const asked = requests.length
      ? "; " + requests.length + " model request" + (requests.length === 1 ? "" : "s") +
        (retried ? " (" + retried + " of them retries)" : "")
      : "";
    const usage = end.kind.usage
      ? "; " + end.kind.usage.input_tokens + " tokens in, " + end.kind.usage.output_tokens + " out"
      : "";
    return el("li", { class: "turn", "data-seq": String(events[0].seq) },
      el("div", { class: "meta" }, "turn #" + end.seq + " (" + status + "): " + took +
        " ms from its message to its end, before its events were written" + asked + usage),
      el("ol", { class: "waterfall" }, ...bars),
      requests.length && base ? TS.sentRequests(base, end.seq) : null);
  }

  /** A turn recorded before turnstile kept timing: each event's bar starts where the one before it was recorded. */
  function unmeasured(events, scale) {
    const begin = events[0].at_ms;
    const end = Math.max(...events.map((e) => e.at_ms));
    const span = Math.max(1, end - begin, scale);
    const bars = [];
    let before = begin;
    for (const event of events.slice(1)) {
      const k = event.kind;
      let start = before;
      let length = event.at_ms - before;
      if (k.type === "tool_result" && typeof k.duration_ms === "number") {
        length = k.duration_ms;
        start = event.at_ms - k.duration_ms;
      }
      bars.push(bar(k.type + (k.name ? " " + visible(k.name) : ""), start - begin, length, span,
        k.type.replace(/[^a-z_]/g, ""), event.seq));
      before = event.at_ms;
    }
    return el("li", { class: "turn", "data-seq": String(events[0].seq) },
      el("div", { class: "meta" }, "turn from #" + events[0].seq + ": " + (end - begin) + " ms in all"),
      el("ol", { class: "waterfall" }, ...bars));
  }

  return waterfalls;
})();
