// The operator console: live sessions of this process (sortable, filtered by user), figures
// and small charts fed by the stats stream, and per-session interrupt, passivate and delete.
"use strict";

(() => {
  const { api, stream, el, notice, path, ago } = TS;
  const $ = (id) => document.getElementById(id);
  /** Points each chart keeps: two minutes at one a second. */
  const CHART_POINTS = 120;
  /** Sessions read per page of the live table. */
  const LIVE_PAGE = 200;
  /** How often the live table is read again, ms. */
  const REFRESH_MS = 1000;
  /** Longest wait between two attempts to reopen the stats stream, ms. */
  const MAX_BACKOFF_MS = 10000;

  const series = { live: [], turns: [], p99: [], activations: [] };
  let rows = [];
  let sortBy = "user";
  let ascending = true;
  let cursors = [null]; // the cursor of each page read, for "Next page"
  let stopped = false;
  let armed = null; // the session whose Delete waits for its confirming click

  async function start(me) {
    $("who").textContent = "signed in (" + me.grant + " token)";
    setInterval(() => refresh().catch(fail), REFRESH_MS);
    stats();
    await refresh();
  }

  function fail(err) {
    if (err.status === 401 || err.status === 403) {
      stopped = true;
      if (err.status === 401) {
        sessionStorage.clear();
        TS.showSignIn(err.message);
        return;
      }
    }
    notice(err);
  }

  async function refresh() {
    if (stopped) return;
    const user = $("filter-user").value.trim();
    let q = "?limit=" + LIVE_PAGE;
    if (user) q += "&user=" + encodeURIComponent(user);
    const cursor = cursors[cursors.length - 1];
    if (cursor) q += "&cursor=" + encodeURIComponent(cursor);
    const page = await api("GET", "/v1/admin/live" + q);
    rows = page.sessions;
    $("live-count").textContent = page.total + " live in this process";
    $("next-page").hidden = !page.next_cursor;
    $("next-page").dataset.cursor = page.next_cursor || "";
    draw();
  }

  function stateOf(row) {
    return row.state === "queued" ? "queued " + row.waiting : row.state;
  }

  /** The table rows drawn, by session key: updated in place, so that a focused button keeps
   *  its focus (and a pressed Enter its target) while the table is read again every second. */
  const drawn = new Map();

  function draw() {
    const sorted = rows.slice().sort((a, b) => {
      const x = a[sortBy], y = b[sortBy];
      const order = typeof x === "number" ? x - y : String(x).localeCompare(String(y));
      return ascending ? order : -order;
    });
    const body = $("live-rows");
    const keep = new Set();
    const wanted = sorted.map((r) => {
      const key = r.user + "/" + r.session;
      keep.add(key);
      let tr = drawn.get(key);
      if (!tr) {
        tr = row(r);
        drawn.set(key, tr);
      }
      update(tr, r);
      return tr;
    });
    const held = document.activeElement;
    for (const [key, tr] of drawn) {
      if (!keep.has(key)) {
        tr.remove();
        drawn.delete(key);
      }
    }
    // A row that left took the focused button with it: the keyboard goes to the notice.
    if (held && held !== document.body && !held.isConnected) focusNotice();
    // Move rows only where the order changed: moving a focused node takes its focus away,
    // so whatever had it gets it back.
    const focused = document.activeElement;
    wanted.forEach((tr, i) => {
      if (body.children[i] !== tr) body.insertBefore(tr, body.children[i] || null);
    });
    if (focused && focused !== document.activeElement && focused.isConnected) focused.focus();
    for (const th of document.querySelectorAll("th[data-sort]")) {
      if (th.dataset.sort === sortBy) th.setAttribute("aria-sort", ascending ? "ascending" : "descending");
      else th.removeAttribute("aria-sort");
    }
    $("live-rows").dataset.drawn = String(Number($("live-rows").dataset.drawn || 0) + 1);
  }

  /** Sets `node`'s text only when it changed (a screen reader is not told of unchanged text). */
  function put(node, text) {
    if (node.textContent !== text) node.textContent = text;
  }

  function update(tr, r) {
    const key = r.user + "/" + r.session;
    tr.dataset.state = r.state;
    const cells = tr.children;
    cells[2].className = "state " + r.state;
    put(cells[2], stateOf(r));
    put(cells[3], String(r.turns));
    // The moment itself, in the reader's local time, on hover.
    const last = new Date(r.last_active_ms);
    cells[4].title = last.toLocaleString() + " (" + last.toISOString() + ")";
    put(cells[4], ago(r.idle_ms));
    put(cells[5], String(r.unsaved));
    put(cells[6], String(r.bytes));
    const remove = tr.querySelector("button.danger");
    remove.classList.toggle("armed", armed === key);
    put(remove, armed === key ? "Really delete?" : "Delete");
    const label = TS.visible(key);
    const name = armed === key ? "Really delete " + label + "? Press again to delete it" : "Delete " + label;
    if (remove.getAttribute("aria-label") !== name) remove.setAttribute("aria-label", name);
  }

  function row(r) {
    const key = r.user + "/" + r.session;
    const label = TS.visible(key);
    const interrupt = el("button", { type: "button", class: "interrupt" }, "Interrupt");
    interrupt.setAttribute("aria-label", "Interrupt " + label);
    interrupt.addEventListener("click", () =>
      act("POST", path(r.user, r.session) + "/interrupt", "Interrupted " + label, "Nothing was running in " + label, "interrupted"));
    const passivate = el("button", { type: "button", class: "passivate" }, "Passivate");
    passivate.setAttribute("aria-label", "Passivate " + label);
    passivate.addEventListener("click", () =>
      act("POST", "/v1/admin/sessions/" + encodeURIComponent(r.user) + "/" + encodeURIComponent(r.session) + "/passivate",
        "Passivating " + label, label + " is not live (starting or already stopping)", "passivating"));
    // The confirmation lives in `armed` (the row is updated every second): the first click
    // arms it for a few seconds, the second deletes.
    const remove = el("button", { type: "button", class: "danger" }, "Delete");
    remove.setAttribute("aria-label", "Delete " + label);
    remove.addEventListener("click", () => {
      if (armed === key) {
        armed = null;
        act("DELETE", path(r.user, r.session), "Deleted " + label, label + " did not exist", "deleted");
        return;
      }
      armed = key;
      TS.announce("Press Delete again within 4 seconds to delete " + label + ".");
      setTimeout(() => {
        if (armed === key) armed = null;
        draw();
      }, 4000);
      draw();
    });
    const inspect = el("a", { class: "inspect", href: "/inspect#" + encodeURIComponent(r.user) + "/" + encodeURIComponent(r.session) }, "Inspect");
    inspect.setAttribute("aria-label", "Inspect " + label);
    return el("tr", { "data-key": key, "data-state": r.state },
      el("td", { class: "id-cell" }, TS.idNode(r.user)), el("td", { class: "id-cell" }, TS.idNode(r.session)),
      el("td", {}), el("td", { class: "num" }), el("td", {}),
      el("td", { class: "num" }), el("td", { class: "num" }),
      el("td", { class: "actions" }, inspect, " ", interrupt, passivate, remove));
  }

  /** Puts the keyboard on the notice (which says what the last action did). */
  function focusNotice() {
    const box = $("notice");
    box.tabIndex = -1;
    box.focus();
  }

  async function act(method, url, yes, no, field) {
    try {
      const answer = await api(method, url);
      notice(answer[field] ? yes + "." : no + ".", "info");
      await refresh();
      // The row (and the button pressed) may be gone: the keyboard goes to the notice that
      // says what happened, not to the top of the page.
      if (!document.activeElement || document.activeElement === document.body) focusNotice();
    } catch (err) {
      fail(err);
    }
  }

  /** Follows the stats stream, reopening it (with growing pauses) when it drops. */
  async function stats() {
    let backoff = 500;
    while (!stopped) {
      try {
        await stream("GET", "/v1/admin/stats/stream", undefined, (name, data) => {
          if (name !== "stats") return;
          backoff = 500;
          $("stream-state").textContent = "live";
          $("stream-state").className = "stream-state ok";
          figures(data);
        });
        throw new Error("the stream ended");
      } catch (err) {
        if (err instanceof TS.ApiFailure && (err.status === 401 || err.status === 403)) {
          fail(err);
          return;
        }
        $("stream-state").textContent = "stats stream lost: reconnecting…";
        $("stream-state").className = "stream-state lost";
        await new Promise((r) => setTimeout(r, backoff));
        backoff = Math.min(MAX_BACKOFF_MS, backoff * 2);
      }
    }
  }

  function figures(s) {
    const fixed = (x) => (x === null || x === undefined ? "–" : x.toFixed(x < 10 ? 1 : 0));
    const r = s.rejections;
    const items = [
      ["live sessions", String(s.live_sessions)],
      ["peak", String(s.peak_live_sessions)],
      ["turns/s", fixed(s.turns_per_s)],
      ["activations/s", fixed(s.activations_per_s)],
      ["evictions/s", fixed(s.evictions_per_s)],
      ["p50 turn ms", fixed(s.turn_p50_ms)],
      ["p99 turn ms", fixed(s.turn_p99_ms)],
      ["rejected (last s)", "overloaded " + r.overloaded + ", capacity " + r.at_capacity + ", draining " + r.draining + ", busy " + r.busy],
      ["turns (total)", String(s.totals.turns)],
    ];
    $("totals").replaceChildren(...items.flatMap(([k, v]) => [el("dt", {}, k), el("dd", {}, v)]));
    push("live", s.live_sessions);
    push("turns", s.turns_per_s);
    push("p99", s.turn_p99_ms || 0);
    push("activations", s.activations_per_s);
  }

  function push(name, value) {
    const points = series[name];
    points.push(value);
    if (points.length > CHART_POINTS) points.shift();
    chart($("chart-" + name), points);
  }

  /** A line chart of `points`, scaled to its largest value, drawn by hand. */
  function chart(canvas, points) {
    const g = canvas.getContext("2d");
    const { width, height } = canvas;
    g.clearRect(0, 0, width, height);
    const top = Math.max(1, ...points);
    g.strokeStyle = "#2b6cb0";
    g.lineWidth = 2;
    g.beginPath();
    points.forEach((v, i) => {
      const x = width - (points.length - 1 - i) * (width / (CHART_POINTS - 1));
      const y = height - 4 - (v / top) * (height - 14);
      if (i === 0) g.moveTo(x, y);
      else g.lineTo(x, y);
    });
    g.stroke();
    g.fillStyle = "#4a5568";
    g.font = "10px sans-serif";
    g.fillText("max " + (top < 10 ? top.toFixed(1) : Math.round(top)), 4, 10);
    canvas.dataset.points = String(points.length);
  }

  for (const th of document.querySelectorAll("th[data-sort]")) {
    th.querySelector("button").addEventListener("click", () => {
      ascending = sortBy === th.dataset.sort ? !ascending : true;
      sortBy = th.dataset.sort;
      draw();
    });
  }
  $("filter-form").addEventListener("submit", (e) => {
    e.preventDefault();
    cursors = [null];
    refresh().catch(fail);
  });
  $("next-page").addEventListener("click", () => {
    cursors.push($("next-page").dataset.cursor);
    refresh().catch(fail);
  });
  TS.signIn(start, true);
})();
