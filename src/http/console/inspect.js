// The inspector: one session's statistics, state, per-turn timing, raw event log (paged) and
// artifacts, read through the same API as any client. The session is named in the address's
// fragment (`/inspect#USER/SESSION`, each part URL-encoded), which never reaches a server.
// The turns' waterfalls are drawn by waterfall.js.
"use strict";

(() => {
  const { api, el, notice, path, visible, idNode, when } = TS;
  const $ = (id) => document.getElementById(id);
  /** Events per page of the log. */
  const EVENTS_PAGE = 50;
  /** Characters of one event's JSON shown before it is cut (the API has it whole). */
  const MAX_JSON_CHARS = 20000;
  /** How often a session live in the server is read again while it is shown. */
  const LIVE_REFRESH_MS = 2000;
  /** Event kinds the filter names; the rest are "other kinds". */
  const NAMED_KINDS = ["user_input", "agent_output", "tool_call", "tool_result", "turn_failed", "note", "artifact_saved"];

  let me = null;
  let user = "";
  let session = "";
  let total = 0; // events in the log
  let from = 1; // the first event of the page shown
  let shownEvents = []; // the page shown, for the filter
  let refreshing = null; // the timer of the next read of a live session
  let forked = ""; // what to say once a fork just made is shown
  // Answers come back in any order: each read notes what it was for, and draws nothing once
  // that is no longer what is shown. `showing` counts the sessions shown (each load), `paging`
  // the reads of a page of events (the newest read wins).
  let showing = 0;
  let paging = 0;

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
    clearTimeout(refreshing);
    const gen = ++showing;
    const note = forked;
    forked = "";
    const t = target();
    if (!t) return;
    user = t.user;
    session = t.session;
    $("pick-user").value = user;
    $("pick-session").value = session;
    $("title").replaceChildren("Session ", idNode(session, "span"), " of ", idNode(user, "span"));
    // Nothing of the session shown before stays while another is read (or refused).
    for (const id of ["stats", "state-rows", "turns", "event-rows", "artifacts"]) $(id).replaceChildren();
    $("turns-scale").textContent = "";
    $("events-range").textContent = "loading…";
    $("state-result").textContent = "";
    $("fork-result").textContent = "";
    let view;
    try {
      view = await api("GET", path(user, session));
    } catch (err) {
      if (gen === showing) $("events-range").textContent = "";
      throw err;
    }
    if (gen !== showing) return;
    total = view.meta.events;
    stats(view);
    state(view);
    from = Math.max(1, total - EVENTS_PAGE + 1);
    await events();
    if (gen !== showing) return;
    await artifacts(gen);
    if (gen !== showing) return;
    $("fork-result").textContent = note;
    follow(view.live, gen);
  }

  /** While the session shown (`gen`) is live in the server, reads it again every few seconds. */
  function follow(live, gen) {
    if (gen !== showing) return;
    clearTimeout(refreshing);
    if (!live) return;
    refreshing = setTimeout(() => refresh(gen), LIVE_REFRESH_MS);
  }

  /** Reads a live session again: its statistics and state, and the log if the newest page is
   *  shown and the log grew (what is open and where the keyboard is stay as they were). A
   *  failed read is shown and tried again at the next tick, unless the session is gone or no
   *  longer the caller's. */
  async function refresh(gen) {
    let live = true;
    try {
      const view = await api("GET", path(user, session));
      if (gen !== showing) return;
      live = view.live;
      stats(view);
      state(view);
      const newest = from === Math.max(1, total - EVENTS_PAGE + 1);
      if (view.meta.events !== total) {
        total = view.meta.events;
        if (newest) from = Math.max(1, total - EVENTS_PAGE + 1);
        await events();
      }
    } catch (err) {
      fail(err);
      if ([401, 403, 404].includes(err.status)) return;
    }
    follow(live, gen);
  }

  function stats(view) {
    const m = view.meta;
    const items = [
      ["events", String(m.events)],
      ["version", String(m.version)],
      ["created", when(m.created_ms)],
      ["updated", when(m.updated_ms)],
      ["live here", view.live ? "yes, read again every " + LIVE_REFRESH_MS / 1000 + " s" : "no"],
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

  async function readEvents(start, limit) {
    return api("GET", path(user, session) + "/events?from=" + start + "&limit=" + limit);
  }

  async function events() {
    const gen = showing;
    const read = ++paging;
    const current = () => gen === showing && read === paging;
    const page = await readEvents(from, EVENTS_PAGE);
    if (!current()) return;
    const list = page.events;
    // What is open, and where the keyboard is, stay so when the rows are drawn again.
    const open = new Set([...document.querySelectorAll("#event-rows details[open]")]
      .map((d) => d.closest("tr").dataset.seq));
    const focused = document.activeElement;
    const focusedRow = focused && focused.closest ? focused.closest("#event-rows tr") : null;
    const focusedSeq = focusedRow ? focusedRow.dataset.seq : null;
    const focusedClass = focused ? focused.className : "";
    const focusedTag = focused ? focused.tagName : "";
    shownEvents = list;
    $("event-rows").replaceChildren(...list.map((e) => eventRow(e, open.has(String(e.seq)))));
    filter();
    if (focusedSeq !== null && !focused.isConnected) {
      const row = $("event-rows").querySelector('tr[data-seq="' + focusedSeq + '"]');
      const again = row && !row.hidden && [...row.querySelectorAll(focusedTag)].find((n) => n.className === focusedClass);
      if (again) again.focus();
      else {
        $("h-events").tabIndex = -1;
        $("h-events").focus();
      }
    }
    $("events-range").textContent = list.length
      ? "#" + list[0].seq + "–#" + list[list.length - 1].seq + " of " + total
      : "none";
    // A button that goes disabled while it has the keyboard would drop it to the page: it
    // goes to the other button, or to the heading when both are.
    const older = $("events-older");
    const newer = $("events-newer");
    const pressed = document.activeElement;
    older.disabled = from <= 1;
    newer.disabled = page.next_from === null;
    if ((pressed === older || pressed === newer) && pressed.disabled) {
      const other = pressed === older ? newer : older;
      if (!other.disabled) other.focus();
      else {
        $("h-events").tabIndex = -1;
        $("h-events").focus();
      }
    }
    await timing(list, page.next_from, current);
  }

  /** Shows the rows of the page that the filter's kind and text match. */
  function filter() {
    const kind = $("filter-kind").value;
    const text = $("filter-text").value.trim().toLowerCase();
    let shown = 0;
    for (const row of $("event-rows").children) {
      const event = shownEvents.find((e) => String(e.seq) === row.dataset.seq);
      const type = event.kind.type;
      const kindMatches = !kind || (kind === "other" ? !NAMED_KINDS.includes(type) : type === kind);
      const textMatches = !text || JSON.stringify(event).toLowerCase().includes(text);
      row.hidden = !(kindMatches && textMatches);
      if (!row.hidden) shown++;
    }
    $("filter-count").textContent = kind || text
      ? shown + " of the " + shownEvents.length + " events of this page match"
      : "";
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

  function eventRow(event, open) {
    // Bidi controls and invisible characters in a value are written out: they could reorder or
    // hide the text around them.
    let json = visible(JSON.stringify(event, null, 2));
    if (json.length > MAX_JSON_CHARS) json = json.slice(0, MAX_JSON_CHARS) + "\n… (cut; the API has it whole)";
    // Reached only once the JSON is open: 50 rows add no tab stops.
    const fork = el("button", { type: "button", class: "fork-here" }, "Fork at #" + event.seq);
    fork.addEventListener("click", () => {
      $("fork-seq").value = String(event.seq);
      $("fork-to").focus();
    });
    return el("tr", { "data-seq": String(event.seq) },
      el("td", { class: "num" }, String(event.seq)),
      el("td", {}, when(event.at_ms, true)),
      el("td", {}, event.author),
      el("td", {}, kindOf(event)),
      el("td", {}, el("details", { open: Boolean(open) }, el("summary", {}, "JSON"),
        el("pre", { class: "json" }, json), fork)));
  }

  /**
   * The events shown, cut into turns (each from a user input), drawn as small waterfalls on
   * one time scale. A turn cut by the page's edge is drawn whole: the events before the page
   * back to its user input, and after it up to the next one, are read (one page each way).
   */
  async function timing(list, nextFrom, current) {
    let all = list;
    // The neighbours only complete a cut turn: if they cannot be read, the page is drawn alone.
    try {
      if (list.length && list[0].kind.type !== "user_input" && list[0].seq > 1) {
        const start = Math.max(1, list[0].seq - EVENTS_PAGE);
        const before = (await readEvents(start, list[0].seq - start)).events;
        const at = before.map((e) => e.kind.type).lastIndexOf("user_input");
        if (at >= 0) all = before.slice(at).concat(all);
      }
      if (list.length && nextFrom !== null && nextFrom !== undefined) {
        const after = (await readEvents(nextFrom, EVENTS_PAGE)).events;
        const next = after.findIndex((e) => e.kind.type === "user_input");
        all = all.concat(next >= 0 ? after.slice(0, next) : after);
      }
    } catch (_) {
      all = list;
    }
    if (!current()) return;
    const { scale, turns } = TS.waterfalls(all, path(user, session));
    $("turns-scale").textContent = turns.length
      ? "One scale for every turn: the full width of a bar's track is " + scale + " ms."
      : "";
    // A live session is drawn again every few seconds: a turn's requests the reader opened,
    // or holds the keyboard in, stay as they are (read once) and keep the focus.
    const focused = document.activeElement;
    const kept = new Map(Array.from($("turns").querySelectorAll("details.sent-requests"), (d) => [d.dataset.seq, d])
      .filter(([, d]) => d.open || d.contains(focused)));
    for (const turn of turns) {
      const fresh = turn.querySelector("details.sent-requests");
      const old = fresh && kept.get(fresh.dataset.seq);
      if (old) fresh.replaceWith(old);
    }
    $("turns").replaceChildren(...turns);
    if (focused && focused !== document.activeElement && document.contains(focused)) focused.focus({ preventScroll: true });
  }

  async function artifacts(gen) {
    let answer;
    try {
      answer = await api("GET", path(user, session) + "/artifacts");
      if (gen !== showing) return;
    } catch (err) {
      if (gen !== showing) return;
      if (err.status === 404 || err.status === 501) {
        $("artifacts").replaceChildren(el("li", { class: "hint" }, "no artifact store"));
        return;
      }
      throw err;
    }
    const items = answer.artifacts.map((a) => {
      // Every version, read when first opened; each can be downloaded and, if it is text,
      // previewed.
      const versions = el("ol", { class: "plain-list versions" });
      const more = el("details", { class: "artifact-versions" },
        el("summary", {}, "Versions (newest " + a.version + ")"), versions);
      more.addEventListener("toggle", () => {
        if (more.open && !versions.childElementCount) showVersions(a, versions).catch(fail);
      });
      return el("li", { "data-artifact": a.name }, idNode(a.name), " · " + a.mime, more);
    });
    if (!items.length) items.push(el("li", { class: "hint" }, "none"));
    $("artifacts").replaceChildren(...items);
  }

  /** Bytes of a version shown in its preview; the rest is left out, saying so. */
  const PREVIEW_BYTES = 64 * 1024;

  /** Types previewed as text; anything else is only downloaded (the page shows no image or
   *  other media from an upload). */
  function previewable(mime) {
    return /^text\//.test(mime) || /^application\/([a-z.+-]*\+)?(json|xml|yaml|x-ndjson)\b/.test(mime);
  }

  async function showVersions(a, list) {
    list.replaceChildren(el("li", { class: "hint" }, "loading…"));
    const answer = await api("GET", path(user, session) + "/artifacts/" + encodeURIComponent(a.name) + "/versions");
    list.replaceChildren(...answer.versions.slice().reverse().map((v) => {
      const label = visible(v.name) + " version " + v.version;
      const get = el("button", { type: "button" }, "Download");
      get.setAttribute("aria-label", "Download " + label);
      get.addEventListener("click", () => download(v).catch(fail));
      const item = el("li", { "data-version": String(v.version) },
        "version " + v.version + " · " + v.bytes + " bytes · " + v.mime + " · ", when(v.saved_ms), " ", get);
      if (previewable(v.mime)) {
        const show = el("button", { type: "button", class: "preview" }, "Preview");
        show.setAttribute("aria-label", "Preview " + label);
        show.setAttribute("aria-expanded", "false");
        show.addEventListener("click", () => preview(v, item, show).catch(fail));
        item.append(" ", show);
      }
      return item;
    }));
  }

  /** Shows a text version's first bytes as text (bidi controls written out), or hides it. */
  async function preview(v, item, button) {
    const shown = item.querySelector("pre.preview");
    if (shown) {
      shown.remove();
      button.setAttribute("aria-expanded", "false");
      return;
    }
    const blob = await fetchVersion(v);
    const bytes = new Uint8Array(await blob.slice(0, PREVIEW_BYTES).arrayBuffer());
    let text = visible(new TextDecoder("utf-8", { fatal: false }).decode(bytes));
    if (blob.size > PREVIEW_BYTES) text += "\n… (the first " + PREVIEW_BYTES / 1024 + " KiB of " + blob.size + " bytes; download it for the rest)";
    // Focusable: a long preview scrolls, and the keyboard must reach it to scroll it.
    item.append(el("pre", { class: "json preview", tabIndex: 0 }, text));
    button.setAttribute("aria-expanded", "true");
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

  /** Forks the session shown at the event the form names into the session it names, then
   *  shows the new one. */
  async function forkAt() {
    $("fork-result").textContent = "";
    const seq = Number($("fork-seq").value);
    const to = $("fork-to").value.trim();
    try {
      await api("POST", path(user, session) + "/fork", { to, at_seq: seq });
    } catch (err) {
      $("fork-result").textContent = "Not forked: " + (err.message || String(err));
      throw err;
    }
    $("fork-to").value = "";
    // The new address shows the fork (`hashchange` reads it); the line says so once it has.
    forked = "Forked at #" + seq + " into " + visible(to) + ", shown here now.";
    location.hash = encodeURIComponent(user) + "/" + encodeURIComponent(to);
  }

  /** One version's bytes, through fetch (the token goes in a header, never in a link). */
  async function fetchVersion(a) {
    const url = path(user, session) + "/artifacts/" + encodeURIComponent(a.name) + "?version=" + a.version;
    const response = await fetch(url, { headers: { Authorization: "Bearer " + (sessionStorage.getItem("turnstile.token") || "") } });
    if (!response.ok) throw new TS.ApiFailure(response.status, "", "The download was refused (" + response.status + ").");
    return response.blob();
  }

  /** Downloads a version and saves it. */
  async function download(a) {
    const blob = await fetchVersion(a);
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
  $("events-filter").addEventListener("submit", (e) => e.preventDefault());
  $("filter-kind").addEventListener("change", filter);
  $("filter-text").addEventListener("input", filter);
  $("fork-form").addEventListener("submit", (e) => {
    e.preventDefault();
    forkAt().catch(fail);
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
