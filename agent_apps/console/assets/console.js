// agent-apps console: live updates of the page, and nothing else.
//
// The page names its stream in <body data-live="...">. The server sends "patch"
// events: a list of {id, parent, html}. Each replaces the element of that id (keeping
// which <details> were open), or is appended to the element `parent` when the page has
// none yet; html null removes the element. The HTML is rendered and escaped by the
// server; this script never builds markup from run data itself.
"use strict";

(function () {
  const url = document.body.dataset.live;
  const state = document.querySelector(".live-state");
  if (!url) {
    return;
  }

  function show(text, kind) {
    if (state) {
      state.textContent = text;
      state.dataset.state = kind;
    }
  }

  function apply(op) {
    const old = document.getElementById(op.id);
    if (op.html === null) {
      if (old) {
        old.remove();
      }
      return;
    }
    if (old) {
      const open = Array.from(old.querySelectorAll("details[id]")).map((d) => [d.id, d.open]);
      old.outerHTML = op.html;
      for (const [id, wasOpen] of open) {
        const details = document.getElementById(id);
        if (details) {
          details.open = wasOpen;
        }
      }
    } else if (op.parent) {
      const parent = document.getElementById(op.parent);
      if (parent) {
        parent.insertAdjacentHTML("beforeend", op.html);
      }
    }
  }

  const source = new EventSource(url);
  source.addEventListener("open", () => show("live", "live"));
  source.addEventListener("error", () => show("reconnecting…", "lost"));
  source.addEventListener("patch", (event) => {
    for (const op of JSON.parse(event.data)) {
      apply(op);
    }
    document.body.dataset.updated = String(Date.now());
  });
  source.addEventListener("gone", () => {
    source.close();
    show("gone", "lost");
  });
  window.addEventListener("pagehide", () => source.close());
})();
