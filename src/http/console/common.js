// Shared by both pages: the token kept in this tab, calls to the JSON API, server-sent events
// read from a fetch body, and elements built with text only (never HTML).
"use strict";

const TS = (() => {
  const TOKEN = "turnstile.token";

  /** An API answer that was not 2xx, with a message a person can act on. */
  class ApiFailure extends Error {
    constructor(status, code, message) {
      super(message);
      this.status = status;
      this.code = code;
    }
  }

  function token() {
    return sessionStorage.getItem(TOKEN) || "";
  }

  function setToken(value) {
    sessionStorage.setItem(TOKEN, value);
  }

  function forget() {
    sessionStorage.clear();
  }

  function headers(extra) {
    const h = Object.assign({}, extra || {});
    const t = token();
    if (t) h.Authorization = "Bearer " + t;
    return h;
  }

  /** What a failed answer means to the person at the page. */
  function explain(status, code, message) {
    if (status === 401) return "Your token is wrong or has expired: sign in again.";
    if (status === 403) {
      if (code === "forbidden" && /own user/.test(message)) {
        return "Not your session: this token reaches only its own user's sessions.";
      }
      return "Not allowed (403): " + message;
    }
    return message || "The server answered " + status + ".";
  }

  async function failure(response) {
    let code = "", message = "";
    try {
      const body = await response.json();
      code = (body.error && body.error.code) || "";
      message = (body.error && body.error.message) || "";
    } catch (_) { /* not JSON */ }
    return new ApiFailure(response.status, code, explain(response.status, code, message));
  }

  /** `fetch`, with a network failure (the browser's bare "Failed to fetch") told plainly. */
  async function reach(path, init) {
    try {
      return await fetch(path, init);
    } catch (err) {
      if (err && err.name === "AbortError") throw err;
      throw new ApiFailure(0, "unreachable",
        "The server could not be reached (is turnstile serve running, and the network up?). " +
        "Nothing was lost on this page: try again.");
    }
  }

  /** A good answer ends a banner that said the server could not be reached or was
   *  unavailable: it is back. (A refusal such as 403 or 409 stays until the next action.) */
  function recovered() {
    const box = document.getElementById("notice");
    if (!box.hidden && box.dataset.recover === "1") notice("");
  }

  /** Calls the API; resolves to the JSON body, rejects with an ApiFailure. */
  async function api(method, path, body) {
    const init = { method, headers: headers(), cache: "no-store" };
    if (body !== undefined) {
      init.headers["Content-Type"] = "application/json";
      init.body = JSON.stringify(body);
    }
    const response = await reach(path, init);
    if (!response.ok) throw await failure(response);
    recovered();
    return response.json();
  }

  /** Opens an event stream (GET or POST) and calls onEvent(name, data) for each event. */
  async function stream(method, path, body, onEvent, signal) {
    const init = { method, headers: headers({ Accept: "text/event-stream" }), signal };
    if (body !== undefined) {
      init.headers["Content-Type"] = "application/json";
      init.body = JSON.stringify(body);
    }
    const response = await reach(path, init);
    if (!response.ok) throw await failure(response);
    recovered();
    const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
    let buffer = "";
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
      buffer += value.replace(/\r\n/g, "\n");
      let end;
      while ((end = buffer.indexOf("\n\n")) >= 0) {
        const block = buffer.slice(0, end);
        buffer = buffer.slice(end + 2);
        let name = "message";
        const data = [];
        for (const line of block.split("\n")) {
          if (line.startsWith("event:")) name = line.slice(6).trim();
          else if (line.startsWith("data:")) data.push(line.slice(5).replace(/^ /, ""));
        }
        if (data.length) onEvent(name, JSON.parse(data.join("\n")));
      }
    }
  }

  /** An element with attributes and children; strings become text nodes, never markup. */
  function el(tag, attrs, ...children) {
    const node = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (k === "class") node.className = v;
      else if (k.startsWith("data-")) node.setAttribute(k, v);
      else node[k] = v;
    }
    for (const child of children) {
      if (child === null || child === undefined) continue;
      node.append(typeof child === "string" ? document.createTextNode(child) : child);
    }
    return node;
  }

  /** Shows `text` in the page's banner (`kind`: error, warn or info; none clears it). An
   *  ApiFailure may be given instead of text: one the server's return cures clears itself. */
  function notice(text, kind) {
    const box = document.getElementById("notice");
    if (text instanceof ApiFailure) {
      box.dataset.recover = text.code === "unreachable" || text.status === 503 ? "1" : "";
      text = text.message;
    } else {
      box.dataset.recover = "";
      if (text instanceof Error) text = text.message;
    }
    if (!text) {
      box.hidden = true;
      box.textContent = "";
      return;
    }
    box.textContent = text;
    box.className = "notice " + (kind || "error");
    box.dataset.kind = kind || "error";
    box.hidden = false;
  }

  /** Characters that reorder or hide text: bidi controls, zero-width and invisible marks. */
  const INVISIBLE = /[\u00AD\u061C\u180E\u200B-\u200F\u202A-\u202E\u2060-\u2064\u2066-\u2069\uFEFF]/g;

  /** An untrusted id with every invisible or reordering character written as ⟦U+XXXX⟧. */
  function visible(id) {
    return String(id).replace(INVISIBLE, (c) =>
      "\u27E6U+" + c.charCodeAt(0).toString(16).toUpperCase().padStart(4, "0") + "\u27E7");
  }

  /** An id as an isolated, cut-short element whose title (hover) holds the whole id. */
  function idNode(id, tag) {
    const text = visible(id);
    return el(tag || "span", { class: "id", title: text }, text);
  }

  /** Says `text` to a screen reader (a polite live region each page has) without showing it. */
  function announce(text) {
    const region = document.getElementById("announce");
    // Emptied first, so that the same words said twice are announced twice.
    region.textContent = "";
    setTimeout(() => { region.textContent = text; }, 50);
  }

  /** A moment as the reader's local date and time (or only the time, to the millisecond), in
   *  a `<time>` element whose title gives it in UTC. */
  function when(ms, timeOnly) {
    const d = new Date(ms);
    const text = timeOnly
      ? d.toLocaleTimeString([], { hour: "2-digit", minute: "2-digit", second: "2-digit", fractionalSecondDigits: 3, hourCycle: "h23" })
      : d.toLocaleString();
    return el("time", { dateTime: d.toISOString(), title: d.toISOString() }, text);
  }

  /** A button that asks once more before acting: the first click arms it for a few seconds. */
  function confirmed(button, question, action) {
    const label = button.textContent;
    let timer = null;
    button.addEventListener("click", () => {
      if (!timer) {
        button.textContent = question;
        button.classList.add("armed");
        announce(question + " Press " + label + " again within 4 seconds to confirm.");
        timer = setTimeout(() => {
          button.textContent = label;
          button.classList.remove("armed");
          timer = null;
        }, 4000);
        return;
      }
      clearTimeout(timer);
      timer = null;
      button.textContent = label;
      button.classList.remove("armed");
      action();
    });
  }

  /** A user/session key as the store writes it: `%` and `/` inside ids escaped. */
  function splitKey(key) {
    const at = key.indexOf("/");
    const un = (s) => s.replace(/%2F/g, "/").replace(/%25/g, "%");
    return { user: un(key.slice(0, at)), session: un(key.slice(at + 1)) };
  }

  function path(user, session) {
    return "/v1/sessions/" + encodeURIComponent(user) + "/" + encodeURIComponent(session);
  }

  function ago(ms) {
    if (ms < 1000) return "just now";
    if (ms < 60000) return Math.round(ms / 1000) + " s ago";
    if (ms < 3600000) return Math.round(ms / 60000) + " min ago";
    return Math.round(ms / 3600000) + " h ago";
  }

  /** Wires the sign-in form and the sign-out button; `start` runs once signed in. With
   *  `needAdmin`, a token that is not an admin's is refused at once, saying so. */
  function signIn(start, needAdmin) {
    admin = Boolean(needAdmin);
    const form = document.getElementById("signin-form");
    form.addEventListener("submit", (e) => {
      e.preventDefault();
      const input = document.getElementById("token");
      setToken(input.value.trim());
      input.value = "";
      begin(start);
    });
    document.getElementById("signout").addEventListener("click", () => {
      forget();
      location.reload();
    });
    if (sessionStorage.getItem(TOKEN) !== null) begin(start);
    else showSignIn();
  }

  function showSignIn(message) {
    const app = document.getElementById("app");
    // The keyboard was in the page being hidden (or dropped from it): it goes to the token
    // field. A page just opened keeps its focus where the browser put it.
    const wasInApp = !app.hidden &&
      (app.contains(document.activeElement) || document.activeElement === document.body);
    app.hidden = true;
    document.getElementById("signout").hidden = true;
    document.getElementById("signin").hidden = false;
    document.getElementById("who").textContent = "";
    if (message) notice(message);
    if (wasInApp) document.getElementById("token").focus();
  }

  let admin = false;

  async function begin(start) {
    try {
      const me = await api("GET", "/v1/me");
      if (admin && me.grant === "user") {
        sessionStorage.removeItem(TOKEN);
        showSignIn("This page needs an admin token: the token given is " + visible(me.user) +
          "'s user token, which reaches only that user's own sessions (open the chat page for them).");
        return;
      }
      notice("");
      const signin = document.getElementById("signin");
      // Signing in by the form leaves the keyboard in it: it goes to the page's content.
      const fromForm = signin.contains(document.activeElement);
      signin.hidden = true;
      const app = document.getElementById("app");
      app.hidden = false;
      document.getElementById("signout").hidden = false;
      if (fromForm) {
        app.tabIndex = -1;
        app.focus();
      }
      await start(me);
    } catch (err) {
      if (err.status === 401) {
        sessionStorage.removeItem(TOKEN);
        showSignIn(err.message);
      } else {
        notice(err);
      }
    }
  }

  return {
    api, stream, el, notice, confirmed, splitKey, path, ago, signIn, showSignIn, ApiFailure,
    visible, idNode, announce, when,
  };
})();
