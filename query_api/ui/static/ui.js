// The browser's only script (no build step, no library): forms with data-post and elements
// with data-get fetch an HTML fragment and put it into data-target (or in place of themselves
// with data-swap="outer"). Every request carries X-WorldMM-UI and the session's CSRF token
// (from the page's meta tag), which the server requires on writes: another site's form can
// send neither. The session cookie goes along by itself.
"use strict";

function csrfToken() {
  const meta = document.querySelector('meta[name="csrf-token"]');
  return meta ? meta.content : "";
}

async function load(method, url, body) {
  const response = await fetch(url, {
    method,
    body,
    headers: { "X-WorldMM-UI": "1", "X-CSRF-Token": csrfToken() },
    credentials: "same-origin",
  });
  return { html: await response.text(), reload: response.headers.get("X-UI-Reload") === "1" };
}

function swap(el, target, html, outer) {
  if (outer) {
    el.insertAdjacentHTML("afterend", html);
    el.remove();
  } else if (target) {
    target.innerHTML = html;
  }
  highlightEvidence();
}

// The last answer's evidence: mark those segments on the timeline.
function highlightEvidence() {
  const answer = document.querySelector("#answer .answer");
  const ids = new Set((answer ? answer.dataset.evidence : "").split(",").filter(Boolean));
  document.querySelectorAll(".seg").forEach((seg) => {
    seg.classList.toggle("evidence", ids.has(seg.dataset.id));
  });
  const first = document.querySelector(".seg.evidence");
  if (answer && first && !answer.dataset.scrolled) {
    answer.dataset.scrolled = "1";
    first.scrollIntoView({ block: "nearest", inline: "center" });
  }
}

document.addEventListener("submit", async (event) => {
  const form = event.target;
  if (!form.dataset.post) return;
  event.preventDefault();
  const button = form.querySelector("button");
  if (button) button.disabled = true;
  try {
    const { html, reload } = await load("POST", form.dataset.post, new URLSearchParams(new FormData(form)));
    swap(form, document.querySelector(form.dataset.target), html, false);
    if (reload) await reloadLanes();
  } finally {
    if (button) button.disabled = false;
  }
});

document.addEventListener("click", async (event) => {
  const el = event.target.closest("[data-get]");
  if (!el) return;
  event.preventDefault();
  const { html } = await load("GET", el.dataset.get);
  swap(el, document.querySelector(el.dataset.target), html, el.dataset.swap === "outer");
  if (el.classList.contains("seg")) {
    document.querySelectorAll(".seg.selected").forEach((s) => s.classList.remove("selected"));
    el.classList.add("selected");
  }
});

// After a forget: fetch this page again and replace the timeline, so what went is gone at once.
async function reloadLanes() {
  const { html } = await load("GET", window.location.href);
  const fresh = new DOMParser().parseFromString(html, "text/html").querySelector(".timeline");
  const current = document.querySelector(".timeline");
  if (fresh && current) current.replaceWith(fresh);
  highlightEvidence();
}

// A segment without frames answers its thumbnail with 204: hide the empty image.
document.addEventListener("error", (event) => {
  if (event.target.tagName === "IMG") event.target.classList.add("missing");
}, true);
