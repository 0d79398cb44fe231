// Pages that show a changing state stay live without a reload, one way for every page: an
// element marked data-live-part="<name>" is fetched again from the page's own address and
// swapped in whole. The page polls every data-live-every seconds (on <body> or the first part;
// 10 s unless set) while any part says it is still changing (data-live-active), and once more
// whenever another script dispatches "live:refresh" on document (a socket message, say). The
// [data-live-updated] element says when the parts were last read. A part holding the field being
// edited is left alone until the user moves on, and ticked checkboxes survive a swap. Flash
// messages marked "transient" (a request's "started" note) go once a part has changed.
(function () {
  "use strict";
  const parts = () => Array.from(document.querySelectorAll("[data-live-part]"));
  if (!parts().length) return;
  const first = parts()[0];
  const everySeconds = parseInt(document.body.dataset.liveEvery || first.dataset.liveEvery || "10", 10);
  let timer = null, fetching = false, failures = 0, queued = false, held = false;
  // Each part as the server last sent it: the page's own scripts draw into parts (a chart), so
  // what is on screen is not what to compare with.
  const served = new Map(parts().map((part) => [part.dataset.livePart, part.outerHTML]));

  function anyActive(root) { return root.querySelector("[data-live-part][data-live-active]") !== null; }

  const clock = (date) => window.portalDates.clock(date);

  // Looked up each time: a stamp may sit inside a part that was just swapped.
  function say(text) { document.querySelectorAll("[data-live-updated]").forEach((stamp) => { stamp.textContent = text; }); }

  // A field the person is typing in or choosing from; a focused link or button (the one just
  // pressed) holds nothing back.
  function editing(part) {
    const field = document.activeElement;
    return part.contains(field) && field.matches("input, select, textarea, [contenteditable]");
  }

  function keepTicks(from, into) {
    from.querySelectorAll("input[type=checkbox]:checked").forEach((box) => {
      const twin = into.querySelector(`input[type=checkbox][name="${CSS.escape(box.name)}"][value="${CSS.escape(box.value)}"]`);
      if (twin) twin.checked = true;
    });
  }

  function swap(fresh) {
    let changed = false;
    held = false;
    parts().forEach((current) => {
      const next = fresh.querySelector(`[data-live-part="${CSS.escape(current.dataset.livePart)}"]`);
      if (!next) return;
      if (next.outerHTML === served.get(current.dataset.livePart)) return;
      if (editing(current)) { held = true; return; }
      served.set(current.dataset.livePart, next.outerHTML);
      keepTicks(current, next);
      current.replaceWith(document.importNode(next, true));
      changed = true;
    });
    if (changed) {
      document.querySelectorAll(".messages li.transient").forEach((note) => note.remove());
      document.dispatchEvent(new CustomEvent("live:swapped"));
    }
  }

  function schedule() {
    clearTimeout(timer);
    if (document.hidden) return;
    if (!anyActive(document) && !held) { say(`Updated ${clock(new Date())}; nothing more is changing`); return; }
    // Back off while the portal does not answer, up to a minute.
    const seconds = Math.min(everySeconds * Math.pow(2, failures), 60);
    timer = setTimeout(refresh, seconds * 1000);
  }

  async function refresh() {
    if (fetching) { queued = true; return; }
    fetching = true;
    try {
      const response = await fetch(location.href, { credentials: "same-origin", headers: { "X-Live-Parts": "1" } });
      if (!response.ok) throw new Error(String(response.status));
      const fresh = new DOMParser().parseFromString(await response.text(), "text/html");
      swap(fresh);
      failures = 0;
      say(`Updated ${clock(new Date())}`);
    } catch (error) {
      failures += 1;
      say(`Could not update (${clock(new Date())}); trying again`);
    }
    fetching = false;
    if (queued) { queued = false; refresh(); return; }
    schedule();
  }

  document.addEventListener("live:refresh", () => { clearTimeout(timer); refresh(); });
  document.addEventListener("visibilitychange", () => { if (!document.hidden) refresh(); });
  say(`Updated ${clock(new Date())}`);
  schedule();
})();
