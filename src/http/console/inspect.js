// The inspector: one session's statistics, state, per-turn timing, raw event log (paged) and
// artifacts, read through the same API as any client. The session is named in the address's
// fragment (`/inspect#USER/SESSION`, each part URL-encoded), which never reaches a server.
"use strict";

(() => {
  const { api, el, notice, path, visible, idNode } = TS;
  const $ = (id) => document.getElementById(id);
  /** Events per page of the log. */
  const EVENTS_PAGE = 50;
  /** Characters of one event's JSON shown before it is cut (the API has it whole). */
  const MAX_JSON_CHARS = 20000;

  let me = null;
  let user = "";
  let session = "";
  let total = 0; // events in the log
  let from = 1; // the first event of the page shown

  function fail(err) {
    if (err.status === 401) {
      sessionStorage.clear();
      TS.showSignIn(err.message);
    } else {
      notice(err);
    }
  }

  /** `#USER/SESSION` → the two ids, or null. */
  function target() {
    const hash = location.hash.slice(1);
    const at = hash.indexOf("/");
    if (at <= 0) return null;
    try {
      return { user: decodeURIComponent(hash.slice(0, at)), session: decodeURIComponent(hash.slice(at + 1)) };
    } catch (_) {
      return null;
    }
  }

  async function start(who) {
    me = who;
    $("who").textContent = who.grant === "user" ? "signed in as " + visible(who.user) : "signed in (" + who.grant + " token)";
    if (who.grant === "user") {
      $("pick-user").value = who.user;
      $("pick-user").readOnly = true;
    }
    window.addEventListener("hashchange", () => load().catch(fail));
    await declared();
    await load();
  }

  /** The server's declared state keys (`GET /v1/state-keys`), and which of them the form may set. */
  async function declared() {
    const registry = await api("GET", "/v1/state-keys");
    $("declared-mode").textContent = registry.mode === null ? "(none declared)" : "(mode " + registry.mode + ")";
    const rows = registry.keys.map((k) => el("tr", {},
      el("td", { class: "id-cell" }, idNode(k.name)),
      el("td", {}, k.type),
      el("td", {}, k.default === null ? "–" : el("code", { class: "json" }, visible(JSON.stringify(k.default)))),
      el("td", {}, k.editable ? "yes" : "no"),
      el("td", {}, visible(k.description))));
    if (!rows.length) rows.push(el("tr", {}, el("td", { colSpan: 5, class: "hint" }, "no declared keys")));
    $("declared-rows").replaceChildren(...rows);
    // Session keys only (no scope prefix); a user token sets only the editable ones.
    const settable = registry.keys.filter((k) => !/^(user|app|temp):/.test(k.name) && (me.grant !== "user" || k.editable));
    $("settable-keys").replaceChildren(...settable.map((k) => el("option", { value: k.name })));
  }

  async function load() {
    const t = target();
    if (!t) return;
    user = t.user;
    session = t.session;
    $("pick-user").value = user;
    $("pick-session").value = session;
    $("title").replaceChildren("Session ", idNode(session, "span"), " of ", idNode(user, "span"));
    // Nothing of the session shown before stays while another is read (or refused).
    for (const id of ["stats", "state-rows", "turns", "event-rows", "artifacts"]) $(id).replaceChildren();
    $("events-range").textContent = "";
    $("state-result").textContent = "";
    const view = await api("GET", path(user, session));
    total = view.meta.events;
    stats(view);
    state(view);
    from = Math.max(1, total - EVENTS_PAGE + 1);
    await events();
    await artifacts();
  }

  function stats(view) {
    const m = view.meta;
    const time = (ms) => new Date(ms).toISOString();
    const items = [
      ["events", String(m.events)],
      ["version", String(m.version)],
      ["created", time(m.created_ms)],
      ["updated", time(m.updated_ms)],
      ["live here", view.live ? "yes" : "no"],
      ["pending messages", String(view.pending)],
      ["unsaved events", String(view.unsaved)],
      ["owner", view.owner === null ? "–" : visible(view.owner)],
    ];
    for (const [k, v] of Object.entries(m.stats || {})) {
      items.push([k.replace(/_/g, " "), typeof v === "object" ? JSON.stringify(v) : String(v)]);
    }
    $("stats").replaceChildren(...items.flatMap(([k, v]) => [el("dt", {}, k), el("dd", {}, v)]));
  }

  function state(view) {
    const rows = [];
    const add = (prefix, map) => {
      for (const [k, v] of Object.entries(map || {})) {
        rows.push(el("tr", {}, el("td", { class: "id-cell" }, idNode(prefix + k)),
          el("td", {}, el("code", { class: "json" }, visible(JSON.stringify(v))))));
      }
    };
    // The API gives each scope's keys without their prefix; shown with it.
    add("", view.state);
    add("user:", view.user_state);
    add("app:", view.app_state);
    if (!rows.length) rows.push(el("tr", {}, el("td", { colSpan: 2, class: "hint" }, "no state")));
    $("state-rows").replaceChildren(...rows);
  }

  async function events() {
    const q = "?from=" + from + "&limit=" + EVENTS_PAGE;
    const page = await api("GET", path(user, session) + "/events" + q);
    const list = page.events;
    $("event-rows").replaceChildren(...list.map(eventRow));
    $("events-range").textContent = list.length
      ? "#" + list[0].seq + "–#" + list[list.length - 1].seq + " of " + total
      : "none";
    $("events-older").disabled = from <= 1;
    $("events-newer").disabled = page.next_from === null;
    timing(list);
  }

  function kindOf(event) {
    const k = event.kind;
    let text = k.type;
    if (k.status && k.status.status) text += " · " + k.status.status;
    else if (typeof k.status === "string") text += " · " + k.status;
    if (k.disposition) text += " · " + k.disposition;
    if (event.request_id) text += " · request " + visible(event.request_id);
    return text;
  }

  function eventRow(event) {
    // Bidi controls and invisible characters in a value are written out: they could reorder or
    // hide the text around them.
    let json = visible(JSON.stringify(event, null, 2));
    if (json.length > MAX_JSON_CHARS) json = json.slice(0, MAX_JSON_CHARS) + "\n… (cut; the API has it whole)";
    return el("tr", { "data-seq": String(event.seq) },
      el("td", { class: "num" }, String(event.seq)),
      el("td", {}, new Date(event.at_ms).toISOString().slice(11, 23)),
      el("td", {}, event.author),
      el("td", {}, kindOf(event)),
      el("td", {}, el("details", {}, el("summary", {}, "JSON"), el("pre", { class: "json" }, json))));
  }

  /** The events shown, cut into turns (each from a user input), drawn as small waterfalls. */
  function timing(list) {
    const turns = [];
    for (const event of list) {
      if (event.kind.type === "user_input" || !turns.length) turns.push([]);
      turns[turns.length - 1].push(event);
    }
    $("turns").replaceChildren(...turns.filter((t) => t.length > 1).map(waterfall));
  }

  function waterfall(events) {
    const end = events.find((e) => e.timing);
    return end ? measured(events, end) : unmeasured(events);
  }

  /** One bar of a waterfall: `start` and `length` in ms within a turn of `span` ms. */
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
  function measured(events, end) {
    const t = end.timing;
    const span = Math.max(1, t.queued_ms + (end.kind.duration_ms || 0));
    const agentAt = t.queued_ms + t.permit_ms + t.recall_ms;
    const bars = [bar("queued", 0, t.queued_ms, span, "queued", end.seq)];
    if (t.load_ms != null) bars.push(bar("loading the session", 0, t.load_ms, span, "load", end.seq));
    if (t.permit_ms) bars.push(bar("waiting for a turn permit", t.queued_ms, t.permit_ms, span, "queued", end.seq));
    if (t.recall_ms) bars.push(bar("memory recall", t.queued_ms + t.permit_ms, t.recall_ms, span, "recall", end.seq));
    bars.push(bar("agent", agentAt, t.agent_ms, span, "agent_output", end.seq));
    if (t.first_chunk_ms != null) bars.push(bar("model to first chunk", agentAt, t.first_chunk_ms, span, "first_chunk", end.seq));
    const calls = events.filter((e) => e.kind.type === "tool_call");
    calls.forEach((call, i) => {
      const result = events.find((e) => e.kind.type === "tool_result" && e.kind.call_id === call.kind.call_id);
      const start = (t.tool_start_ms || [])[i] || 0;
      const length = result && typeof result.kind.duration_ms === "number" ? result.kind.duration_ms : 0;
      bars.push(bar("tool " + visible(call.kind.name), agentAt + start, length, span, "tool_call", call.seq));
    });
    const status = end.kind.type === "turn_failed" ? "failed" : end.kind.status.status;
    return el("li", { class: "turn", "data-seq": String(events[0].seq) },
      el("div", { class: "meta" }, "turn #" + end.seq + " (" + status + "): " + span +
        " ms from its message to its end, before its events were written"),
      el("ol", { class: "waterfall" }, ...bars));
  }

  /** A turn recorded before turnstile kept timing: each event's bar starts where the one before it was recorded. */
  function unmeasured(events) {
    const begin = events[0].at_ms;
    const end = Math.max(...events.map((e) => e.at_ms));
    const span = Math.max(1, end - begin);
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

  async function artifacts() {
    let answer;
    try {
      answer = await api("GET", path(user, session) + "/artifacts");
    } catch (err) {
      if (err.status === 404 || err.status === 501) {
        $("artifacts").replaceChildren(el("li", { class: "hint" }, "no artifact store"));
        return;
      }
      throw err;
    }
    const items = answer.artifacts.map((a) => {
      const get = el("button", { type: "button" }, "Download");
      get.setAttribute("aria-label", "Download " + visible(a.name) + " version " + a.version);
      get.addEventListener("click", () => download(a).catch(fail));
      return el("li", {}, idNode(a.name), " · version " + a.version + " · " + a.bytes + " bytes · " +
        a.mime + " ", get);
    });
    if (!items.length) items.push(el("li", { class: "hint" }, "none"));
    $("artifacts").replaceChildren(...items);
  }

  /** Sets the session key the form names to the JSON value typed, then reads the session again. */
  async function setState() {
    // A new try: what the page said about the last one is done.
    notice("");
    $("state-result").textContent = "";
    const name = $("state-key").value.trim();
    let value;
    try {
      value = JSON.parse($("state-value").value);
    } catch (_) {
      $("state-result").textContent = "The value is not JSON: quote text (\"warm\"), or write a number, true, false, null, [] or {}.";
      return;
    }
    let edited;
    try {
      edited = await api("POST", path(user, session) + "/state", { set: { [name]: value } });
    } catch (err) {
      $("state-result").textContent = "Not set: " + (err.message || String(err));
      throw err;
    }
    await load();
    $("state-result").textContent = (value === null ? "Deleted " : "Set ") + visible(name) + " (event " + edited.seq + ").";
  }

  /** Downloads through fetch (the token goes in a header, never in a link). */
  async function download(a) {
    const url = path(user, session) + "/artifacts/" + encodeURIComponent(a.name) + "?version=" + a.version;
    const response = await fetch(url, { headers: { Authorization: "Bearer " + (sessionStorage.getItem("turnstile.token") || "") } });
    if (!response.ok) throw new TS.ApiFailure(response.status, "", "The download was refused (" + response.status + ").");
    const blob = await response.blob();
    const link = el("a", { href: URL.createObjectURL(blob), download: a.name });
    document.body.append(link);
    link.click();
    link.remove();
    setTimeout(() => URL.revokeObjectURL(link.href), 10000);
  }

  $("pick").addEventListener("submit", (e) => {
    e.preventDefault();
    location.hash = encodeURIComponent($("pick-user").value.trim()) + "/" +
      encodeURIComponent($("pick-session").value.trim());
  });
  $("state-form").addEventListener("submit", (e) => {
    e.preventDefault();
    setState().catch(fail);
  });
  $("events-older").addEventListener("click", () => {
    from = Math.max(1, from - EVENTS_PAGE);
    events().catch(fail);
  });
  $("events-newer").addEventListener("click", () => {
    from = Math.min(Math.max(1, total - EVENTS_PAGE + 1), from + EVENTS_PAGE);
    events().catch(fail);
  });
  TS.signIn(start);
})();
