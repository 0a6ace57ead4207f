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
    // A list where the operator ticked runs is left as it is: a refresh would untick them.
    if (!document.hidden && live() && !el.querySelector("input[name=run]:checked")) {
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
            // The run's status changed since the page was made: its actions, state and
            // history panels are out of date too, so the whole page is loaded anew
            // (a completed run offers no Signal, Message or Cancel any more).
            if (badge.dataset.status && badge.dataset.status !== status.dataset.status) {
              window.location.reload();
              return;
            }
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

// A stream (data-stream="URL") is read after the last offset shown, again and again,
// until the console says it is done (closed, or its run ended). Each poll answers at
// once with what is there; the page waits between polls, never the server. A reset
// marker shows as a line of its own: the entries above it from its offset on were
// written by an interrupted attempt, and what follows replaces them.
function follow(el) {
  let after = -1;
  const out = el.querySelector(".chunks");
  const length = el.querySelector(".length");
  const state = el.querySelector(".stream-state");
  const tick = async () => {
    let wait = 1000;
    try {
      const answer = await fetch(el.dataset.stream + "?after=" + after, { credentials: "same-origin" });
      if (answer.status === 200) {
        const got = await answer.json();
        for (const e of got.entries) {
          const line = document.createElement("span");
          line.dataset.offset = String(e.offset);
          if ("reset" in e) {
            line.className = "reset";
            line.textContent = "\n-- reset at " + e.offset + ": entries " + e.reset + " to " + (e.offset - 1) +
              " were written by an interrupted attempt of call " + e.call + "; what follows replaces them\n";
          } else {
            line.className = "chunk";
            line.textContent = typeof e.chunk === "string" ? e.chunk : JSON.stringify(e.chunk) + "\n";
          }
          out.append(line);
          after = e.offset;
        }
        if (length) length.textContent = String(got.length);
        if (got.done) {
          if (state) state.textContent = got.closed ? "closed" : "the run ended";
          el.dataset.done = got.closed ? "closed" : "ended";
          return;
        }
        if (got.entries.length) wait = 250;
      }
    } catch (e) { /* the console stopped, or the network: try again later */ }
    setTimeout(tick, wait);
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

// "Select every run on this page" ticks (or unticks) each run's box in the list.
document.addEventListener("change", (event) => {
  if (event.target.id === "select-page") {
    document.querySelectorAll("input[name=run]").forEach((box) => { box.checked = event.target.checked; });
  }
});

document.addEventListener("DOMContentLoaded", () => {
  document.querySelectorAll("[data-refresh]").forEach(refresh);
  document.querySelectorAll("[data-stream]").forEach(follow);
});
