// Replies rendered as Markdown, into DOM nodes. markdown-it (vendored beside this file, served by
// `serve` itself) parses a reply into tokens; this walks them and creates only the elements of
// a fixed list, with their text as text. Nothing is ever parsed as HTML: markdown-it's `html`
// option is off, so markup in a reply stays the text it is. That is why there is no HTML
// sanitiser here: there is no HTML to clean. Links keep only http(s) and mailto targets and
// open in a new tab with no referrer; images are shown as links (the page loads nothing from
// elsewhere).
"use strict";

TS.markdown = (() => {
  const md = window.markdownit({ html: false, linkify: false, breaks: true, typographer: false });

  /** The block and inline elements a token may open. */
  const ELEMENTS = new Set([
    "p", "blockquote", "ul", "ol", "li", "table", "thead",
    "tbody", "tr", "th", "td", "em", "strong", "s", "a",
  ]);

  /** Link targets kept: anything else is shown as its text. */
  function safeHref(href) {
    try {
      const url = new URL(href);
      return ["http:", "https:", "mailto:"].includes(url.protocol) ? url.href : null;
    } catch (_) {
      return null; // relative or malformed
    }
  }

  /** A fenced or indented code block. */
  function codeBlock(token) {
    const code = document.createElement("code");
    const language = (token.info || "").trim().split(/\s+/)[0];
    if (language) code.dataset.language = language;
    code.textContent = token.content.replace(/\n$/, "");
    const pre = document.createElement("pre");
    pre.append(code);
    return pre;
  }

  /** Renders `tokens` (markdown-it's, nested by `nesting`) as children of `root`. */
  function walk(tokens, root) {
    const stack = [root];
    const top = () => stack[stack.length - 1];
    for (const token of tokens) {
      // A tight list's paragraphs are hidden: their text goes straight into the item.
      if (token.hidden) continue;
      if (token.nesting === -1) {
        if (stack.length > 1) stack.pop();
        continue;
      }
      if (token.nesting === 1) {
        const node = openElement(token);
        top().append(node);
        stack.push(node);
        continue;
      }
      switch (token.type) {
        case "inline":
          walk(token.children || [], top());
          break;
        case "text":
          top().append(document.createTextNode(token.content));
          break;
        case "softbreak":
        case "hardbreak":
          top().append(document.createElement("br"));
          break;
        case "code_inline": {
          const code = document.createElement("code");
          code.textContent = token.content;
          top().append(code);
          break;
        }
        case "fence":
        case "code_block":
          top().append(codeBlock(token));
          break;
        case "hr":
          top().append(document.createElement("hr"));
          break;
        case "image": {
          const alt = token.children ? token.children.map((c) => c.content).join("") : "";
          const target = safeHref(token.attrGet("src") || "");
          const label = "image: " + (alt || target || "(no description)");
          top().append(target ? link(target, label) : document.createTextNode(label));
          break;
        }
        default:
          // html_block and html_inline do not occur with `html` off; anything else a later
          // markdown-it may add is shown as its text.
          if (token.content) top().append(document.createTextNode(token.content));
      }
    }
  }

  function link(href, text) {
    const a = document.createElement("a");
    a.href = href;
    a.rel = "noopener noreferrer nofollow";
    a.target = "_blank";
    a.textContent = text;
    return a;
  }

  /** The element a token opens; a link to a refused target becomes a plain span. A reply's
   *  headings sit under the conversation's own (a level-two heading): `#` becomes `<h3>`, and
   *  so on down to `<h6>`, so that the page's outline stays whole. */
  function openElement(token) {
    const heading = /^h([1-6])$/.exec(token.tag);
    if (heading) return document.createElement("h" + Math.min(6, Number(heading[1]) + 2));
    const tag = ELEMENTS.has(token.tag) ? token.tag : "span";
    if (tag === "a") {
      const href = safeHref(token.attrGet("href") || "");
      if (!href) return document.createElement("span");
      const a = link(href, "");
      const title = token.attrGet("title");
      if (title) a.title = title;
      return a;
    }
    const node = document.createElement(tag);
    if (tag === "ol") {
      // markdown-it gives `start` only for a list that does not start at 1.
      const start = token.attrGet("start");
      if (start !== null && Number.isInteger(Number(start))) node.start = Number(start);
    }
    if (tag === "th" || tag === "td") {
      // markdown-it gives a column's alignment as `style="text-align:…"`; a class keeps the
      // page's policy of no inline style.
      const align = /text-align:(left|right|center)/.exec(token.attrGet("style") || "");
      if (align) node.className = "align-" + align[1];
    }
    return node;
  }

  /** `text` as Markdown: a fragment of elements built with text only. */
  return function render(text) {
    const fragment = document.createDocumentFragment();
    walk(md.parse(String(text), {}), fragment);
    return fragment;
  };
})();
