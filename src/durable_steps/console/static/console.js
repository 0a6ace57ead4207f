// The durable-steps console's only script: live refresh of fragments, values unfolded
// on demand, streams followed. Every page works without it (links and forms are plain).
"use strict";

const live = () => {
  const box = document.getElementById("live");
  return !box || box.checked;
};

// An element with data-refresh="URL" and data-every="SECONDS" is replaced by the
// fragment at URL every so often, while the page is visible and "live" is checked.
// A run's page sends the etag it shows; the server answers 204 while nothing changed.
function refresh(el) {
  const every = Number(el.dataset.every || 5) * 1000;
  const tick = async () => {
    if (!document.hidden && live()) {
      let url = el.dataset.refresh;
      const shown = el.querySelector("[data-etag]");
      if (shown) url += (url.includes("?") ? "&" : "?") + "etag=" + encodeURIComponent(shown.dataset.etag);
      try {
        const answer = await fetch(url, { credentials: "same-origin" });
        if (answer.status === 200) {
          el.innerHTML = await answer.text();
          el.dataset.refreshed = String(Date.now());
          const status = el.querySelector("[data-status]");
          const badge = document.getElementById("status");
          if (status && badge) {
            badge.textContent = status.dataset.status;
            badge.className = "status s-" + status.dataset.status;
          }
        }
      } catch (e) { /* the console stopped, or the network: try again later */ }
    }
    setTimeout(tick, every);
  };
  setTimeout(tick, every);
}

// A link with data-fold loads its fragment into the element after it (a second click
// folds it again); a link with data-more is replaced by the next page it names.
async function unfold(link) {
  const target = link.nextElementSibling;
  if (link.hasAttribute("data-more")) {
    const answer = await fetch(link.href, { credentials: "same-origin" });
    const holder = document.createElement("div");
    holder.innerHTML = await answer.text();
    const node = holder.firstElementChild;
    link.replaceWith(...(node ? node.childNodes : holder.childNodes));
    return;
  }
  if (target && target.dataset.loaded) {
    target.hidden = !target.hidden;
    link.textContent = target.hidden ? "unfold" : "fold";
    return;
  }
  const answer = await fetch(link.href, { credentials: "same-origin" });
  target.innerHTML = await answer.text();
  target.dataset.loaded = "1";
  link.textContent = "fold";
}

// A stream (data-stream="URL") is read from offset to offset until it is closed.
function follow(el) {
  let after = -1;
  const out = el.querySelector(".chunks");
  const tick = async () => {
    const answer = await fetch(el.dataset.stream + "?after=" + after, { credentials: "same-origin" });
    if (answer.status !== 200) return;
    const got = await answer.json();
    for (const [offset, chunk] of got.chunks) {
      out.append(typeof chunk === "string" ? chunk : JSON.stringify(chunk) + "\n");
      after = offset;
    }
    if (!got.closed) setTimeout(tick, 500);
  };
  tick();
}

document.addEventListener("click", (event) => {
  const link = event.target.closest("a[data-fold], a[data-more]");
  if (link) {
    event.preventDefault();
    unfold(link);
  }
});

document.addEventListener("DOMContentLoaded", () => {
  document.querySelectorAll("[data-refresh]").forEach(refresh);
  document.querySelectorAll("[data-stream]").forEach(follow);
});
