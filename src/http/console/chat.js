// The chat page: a user's sessions, one conversation with its full history, a message box
// whose reply streams in, Stop, fork and clear. Everything a user wrote is shown as text; replies are rendered as Markdown with text only (markdown.js).
"use strict";

(() => {
  const { api, stream, el, notice, confirmed, splitKey, path, ago, visible, idNode } = TS;
  const $ = (id) => document.getElementById(id);
  const USER = "turnstile.user";
  const OPEN = "turnstile.session";
  /** Events per history page. */
  const HISTORY_PAGE = 50;
  /** Sessions shown per click of "More". */
  const SESSIONS_SHOWN = 20;
  /** Listing pages read to sort sessions newest first (the API lists by id). */
  const LISTING_PAGES = 10;

  let user = "";
  let session = null;
  let firstSeq = 1; // the oldest event shown
  let lastSeq = 0; // the newest event shown
  let sessions = [];
  let shown = 0;
  const streams = new Map(); // session id → its replies streaming now (several when they overlap)
  function streaming(id) { return streams.get(id) || 0; }
  // Stop acts on the open session, so it is enabled only while that one streams.
  function updateStop() {
    const button = $("stop");
    const focused = document.activeElement === button;
    button.disabled = streaming(session) === 0;
    // A disabled button drops the keyboard's focus to the page: it goes to the message box.
    if (focused && button.disabled) $("input").focus();
  }
  let sync = Promise.resolve(); // appends from the store, one after another

  const statuses = new Map(); // session id → the last status line said about it

  /** Says `text` about the session `key` (the open one by default); shown only while open. */
  function status(text, key) {
    const about = key === undefined ? session : key;
    statuses.set(about, text);
    if (about === session) $("status").textContent = text;
  }

  /** Marks the open session's button in the list. */
  function highlight() {
    for (const b of document.querySelectorAll("#session-list button[data-session]")) {
      const open = b.dataset.session === session;
      b.classList.toggle("current", open);
      if (open) b.setAttribute("aria-current", "true");
      else b.removeAttribute("aria-current");
    }
  }

  function fail(err) {
    if (err.status === 401) {
      sessionStorage.clear();
      TS.showSignIn(err.message);
    } else {
      notice(err);
    }
  }

  async function start(me) {
    const asked = $("as-user").value.trim();
    $("as-user").value = "";
    if (me.grant === "user") {
      // A user token speaks for its own user only, whatever was typed or remembered.
      user = me.user;
      if (asked && asked !== user) {
        notice("This token speaks for " + visible(user) + " only, so the page shows " +
          visible(user) + "'s sessions, not " + visible(asked) + "'s.", "warn");
      }
    } else {
      user = asked || sessionStorage.getItem(USER) || "";
      if (!user) {
        sessionStorage.clear();
        TS.showSignIn("This token reaches every user: give the user id to chat as.");
        return;
      }
    }
    sessionStorage.setItem(USER, user);
    $("who").replaceChildren("signed in as ", idNode(user),
      me.grant === "user" ? "" : " (" + me.grant + " token)");
    await loadSessions();
    const open = sessionStorage.getItem(OPEN);
    if (open) await openSession(open);
  }

  async function loadSessions() {
    const all = [];
    let cursor = null;
    for (let i = 0; i < LISTING_PAGES; i++) {
      const q = "?limit=1000" + (cursor ? "&cursor=" + encodeURIComponent(cursor) : "");
      const page = await api("GET", "/v1/users/" + encodeURIComponent(user) + "/sessions" + q);
      all.push(...page.sessions);
      cursor = page.next_cursor;
      if (!cursor) break;
    }
    all.sort((a, b) => b.updated_ms - a.updated_ms);
    sessions = all;
    shown = 0;
    $("session-list").replaceChildren();
    showMoreSessions();
  }

  function showMoreSessions() {
    const list = $("session-list");
    for (const meta of sessions.slice(shown, shown + SESSIONS_SHOWN)) {
      const id = splitKey(meta.key).session;
      const button = el("button", { type: "button", "data-session": id }, idNode(id));
      button.addEventListener("click", () => openSession(id).catch(fail));
      const updated = new Date(meta.updated_ms);
      list.append(el("li", {}, button, el("small", { title: "updated " + updated.toLocaleString() },
        " " + meta.events + " events, " + ago(Date.now() - meta.updated_ms))));
    }
    shown = Math.min(sessions.length, shown + SESSIONS_SHOWN);
    highlight();
    $("more-sessions").hidden = shown >= sessions.length;
  }

  /** Puts a session opened by id at the top of the list until the store lists it. */
  function ensureListed(id) {
    if (sessions.some((meta) => splitKey(meta.key).session === id)) return;
    const escape = (s) => s.replace(/%/g, "%25").replace(/\//g, "%2F");
    sessions.unshift({ key: escape(user) + "/" + escape(id), events: 0, updated_ms: Date.now() });
    shown = 0;
    $("session-list").replaceChildren();
    showMoreSessions();
  }

  async function openSession(id) {
    session = id;
    ensureListed(id);
    sessionStorage.setItem(OPEN, id);
    notice("");
    $("conv-title").replaceChildren(idNode(id));
    $("inspect-link").href = "/inspect#" + encodeURIComponent(user) + "/" + encodeURIComponent(id);
    $("inspect-link").hidden = false;
    highlight();
    // Loading: said beside the message box and to assistive technology (aria-busy).
    $("status").textContent = "loading…";
    $("history").setAttribute("aria-busy", "true");
    $("history").replaceChildren();
    toolNames.clear();
    for (const x of ["input", "send", "clear"]) $(x).disabled = false;
    updateStop();
    let total = 0;
    try {
      try {
        const view = await api("GET", path(user, id));
        total = view.meta.events;
      } catch (err) {
        if (err.status !== 404) throw err; // 404: a new session, nothing stored yet
      }
      firstSeq = Math.max(1, total - HISTORY_PAGE + 1);
      lastSeq = firstSeq - 1;
      if (total > 0) await appendFrom(firstSeq);
    } finally {
      if (session === id) {
        $("history").removeAttribute("aria-busy");
        $("status").textContent = statuses.get(id) || "";
      }
    }
    $("older").hidden = firstSeq <= 1;
    // A conversation opens at its newest message, as chat apps do.
    toEnd();
    if (!streaming(id)) status(total + " events", id);
  }

  /** Whether the reader is at the newest message (within a line of the end of the history). */
  function atEnd() {
    const h = $("history");
    return h.scrollHeight - h.scrollTop - h.clientHeight < 24;
  }

  /** Shows the newest message: the history scrolled to its end. */
  function toEnd() {
    const h = $("history");
    h.scrollTop = h.scrollHeight;
  }

  async function readEvents(from, limit) {
    const q = "?from=" + from + "&limit=" + limit;
    return (await api("GET", path(user, session) + "/events" + q)).events;
  }

  /** Appends every stored event from `from` on (the tail after a turn, or a session's start). */
  async function appendFrom(from) {
    let next = from;
    for (;;) {
      const events = await readEvents(next, 1000);
      for (const event of events) {
        $("history").append(render(event));
        lastSeq = event.seq;
      }
      if (events.length < 1000) return;
      next = lastSeq + 1;
    }
  }

  async function loadOlder() {
    const from = Math.max(1, firstSeq - HISTORY_PAGE);
    const button = $("older");
    // Not `disabled`: that would take the keyboard's focus away from the button.
    if (button.getAttribute("aria-disabled") === "true") return;
    button.setAttribute("aria-disabled", "true");
    button.textContent = "Loading older messages…";
    let events;
    try {
      events = await readEvents(from, firstSeq - from);
    } finally {
      button.removeAttribute("aria-disabled");
      button.textContent = "Load older messages";
    }
    const top = $("history").firstChild;
    for (const event of events) $("history").insertBefore(render(event), top);
    firstSeq = from;
    if (firstSeq <= 1) {
      // The last page: the button goes, and the keyboard goes to the oldest message, where the
      // reader was heading, not to the top of the page.
      const focused = document.activeElement === button;
      button.hidden = true;
      const oldest = $("history").firstElementChild;
      if (focused && oldest) {
        oldest.tabIndex = -1;
        oldest.focus();
      }
    }
  }

  /** Tool calls seen on this page, by call id: a result is labelled with its call's name. */
  const toolNames = new Map();

  /** A collapsed block: `summary` shown, `body` (JSON or text) on opening. */
  function collapsible(summary, body) {
    // The block scrolls when long, so it takes the keyboard's focus to be scrolled by it.
    return el("details", { class: "tool" }, el("summary", {}, summary),
      el("pre", { class: "json", tabIndex: 0 }, body));
  }

  /** A value as readable text: a string as it is, anything else as indented JSON. */
  function readable(value) {
    return typeof value === "string" ? value : JSON.stringify(value, null, 2);
  }

  /** One stored event as a list item. A reply is rendered as Markdown (TS.markdown builds it
   *  with text only); everything else goes in as text. */
  function render(event) {
    const kind = event.kind;
    let cls = "msg " + event.author;
    let label = event.author;
    let text = kind.text;
    let body = null;
    if (kind.type === "agent_output" && kind.status.status === "interrupted") {
      cls += " interrupted";
      label += " · interrupted (" + kind.status.reason + ")";
    } else if (kind.type === "agent_output" && kind.status.status === "incomplete") {
      cls += " interrupted";
      label += " · incomplete (" + kind.status.reason + ")";
    } else if (kind.type === "agent_output" && kind.status.status === "refused") {
      cls += " interrupted";
      label += " · refused";
    } else if (kind.type === "user_input" && kind.disposition && kind.disposition !== "answered") {
      label += " · " + kind.disposition;
    } else if (kind.type === "turn_failed") {
      cls = "msg system failed";
      label = "turn failed (" + kind.code + ")";
      text = kind.reason;
    } else if (kind.type === "context_cleared") {
      cls = "msg system";
      text = "— context cleared —";
    } else if (kind.type === "tool_call") {
      toolNames.set(kind.call_id, kind.name);
      label += " · tool call" + (kind.server ? " on " + kind.server : "");
      body = collapsible(kind.name, readable(kind.arguments));
    } else if (kind.type === "tool_result") {
      label += " · tool result (" + kind.status +
        (kind.duration_ms === undefined ? "" : ", " + kind.duration_ms + " ms") + ")";
      const name = toolNames.get(kind.call_id);
      body = collapsible((name ? name + ": " : "") + kind.status, readable(kind.result));
    }
    if (body === null) {
      body = kind.type === "agent_output"
        ? el("div", { class: "text md" }, TS.markdown(text === undefined ? "" : text))
        : el("div", { class: "text" }, text === undefined ? "" : String(text));
    } else {
      body = el("div", { class: "text" }, body);
    }
    const fork = el("button", { type: "button", class: "fork", title: "a new session with the history up to here" }, "Fork here");
    fork.addEventListener("click", () => forkAt(event.seq).catch(fail));
    return el("li", { class: cls, "data-seq": String(event.seq), "data-state": "stored" },
      el("div", { class: "meta" }, label + " · #" + event.seq + " ", fork), body);
  }

  async function send(e) {
    e.preventDefault();
    const input = $("input").value;
    if (!input.trim() || !session) return;
    $("input").value = "";
    notice(""); // a new try: the banner about the last one is done
    const body = { input };
    if ($("policy").value) body.policy = $("policy").value;
    const mine = el("li", { class: "msg user pending", "data-state": "sending" },
      el("div", { class: "meta" }, "user · sending"), el("div", { class: "text" }, input));
    const text = el("div", { class: "text md" });
    const reply = el("li", { class: "msg agent pending", "data-state": "waiting", "data-chunks": "0" },
      el("div", { class: "meta" }, "agent · streaming"), text);
    // The history follows the reply as it grows unless the reader scrolled up to read.
    const follow = atEnd();
    $("history").append(mine, reply);
    if (follow) toEnd();
    const key = session;
    streams.set(key, streaming(key) + 1);
    updateStop();
    status("streaming…", key);
    let outcome = null;
    // The reply so far, rendered again as Markdown while it streams. Each render parses the
    // whole reply so far, so renders are spaced by at least 50 ms and four times as long as the
    // last one took: a long reply is redrawn less often rather than keeping the page busy.
    let streamed = "";
    let drawing = null;
    let pause = 50;
    const draw = () => {
      drawing = null;
      const began = performance.now();
      const following = atEnd();
      text.replaceChildren(TS.markdown(streamed));
      if (following) toEnd();
      pause = Math.max(50, 4 * (performance.now() - began));
    };
    try {
      await stream("POST", path(user, session) + "/turns", body, (name, data) => {
        if (name === "chunk") {
          streamed += data.text;
          if (drawing === null) drawing = setTimeout(draw, pause);
          reply.dataset.chunks = String(Number(reply.dataset.chunks) + 1);
          reply.dataset.state = "streaming";
        } else if (name === "outcome") {
          outcome = data;
        } else if (name === "error") {
          throw new TS.ApiFailure(0, data.error.code, data.error.message);
        }
      });
      if (!outcome) throw new TS.ApiFailure(0, "dropped", "");
      status(outcome.outcome + (outcome.reason ? " (" + outcome.reason + ")" : ""), key);
    } catch (err) {
      if (err.code === "dropped" || (err instanceof TypeError && reply.dataset.state === "streaming")) {
        notice("The reply stream was cut off; the turn goes on on the server. Reloaded the history from the store.", "warn");
      } else {
        fail(err);
      }
      // Nothing reached the server: give the typed text back unless something new was typed.
      if (reply.dataset.state === "waiting" && key === session && !$("input").value) {
        $("input").value = input;
      }
      status("failed", key);
    } finally {
      clearTimeout(drawing);
      streams.set(key, streaming(key) - 1);
      updateStop();
    }
    // What the store holds replaces the provisional items (with their sequence numbers).
    const following = atEnd();
    mine.remove();
    reply.remove();
    sync = sync.then(() => appendFrom(lastSeq + 1)).catch(fail);
    await sync;
    if (following) toEnd();
    loadSessions().catch(fail);
  }

  async function stop() {
    const key = session;
    if (streaming(key) === 0) return;
    const answer = await api("POST", path(user, key) + "/interrupt");
    // The turn may have ended, and the page said how, while the interrupt was on its way; or
    // another session may be open by now.
    if (streaming(key) > 0) {
      status(answer.interrupted ? "stopping…" : "nothing was running", key);
    }
  }

  async function forkAt(seq) {
    const to = session + "-fork-" + seq + "-" + Math.random().toString(36).slice(2, 7);
    await api("POST", path(user, session) + "/fork", { to, at_seq: seq });
    await loadSessions();
    await openSession(to);
    notice("Forked at #" + seq + " into " + visible(to) + ".", "info");
  }

  async function clear() {
    await api("POST", path(user, session) + "/clear");
    await openSession(session);
  }

  $("composer").addEventListener("submit", (e) => send(e).catch(fail));
  $("input").addEventListener("keydown", (e) => {
    if (e.key === "Enter" && !e.shiftKey) {
      e.preventDefault();
      $("composer").requestSubmit();
    }
  });
  $("stop").addEventListener("click", () => stop().catch(fail));
  $("older").addEventListener("click", () => loadOlder().catch(fail));
  $("more-sessions").addEventListener("click", showMoreSessions);
  $("new-session").addEventListener("submit", (e) => {
    e.preventDefault();
    const id = $("new-session-id").value.trim();
    $("new-session-id").value = "";
    if (id) openSession(id).catch(fail);
  });
  confirmed($("clear"), "Really clear?", () => clear().catch(fail));
  TS.signIn(start);
})();
