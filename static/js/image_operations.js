// Console → Images: an unfinished image operation's progress, polled every 2 s from its JSON
// (console/views_images.py), until every node's job has ended; then the page reloads once so
// the per-node table shows what the nodes listed. Without script the page shows the state as
// of its loading.
(function () {
  "use strict";
  const POLL_MS = 2000;
  function text(element, value) { if (element) element.textContent = value; }
  function render(section, data) {
    const bar = section.querySelector("[data-bar]");
    if (bar && data.nodes_total) bar.style.width = Math.round(100 * data.nodes_ended / data.nodes_total) + "%";
    const progress = section.querySelector("[role=progressbar]");
    if (progress) progress.setAttribute("aria-valuenow", String(data.nodes_ended));
    text(section.querySelector("[data-summary]"),
      data.nodes_ended + " of " + data.nodes_total + " node(s) done" +
      (data.nodes_failed ? ", " + data.nodes_failed + " failed" : "") + " · " + data.seconds + " s" +
      (data.finished ? " · finished" : ""));
    data.nodes.forEach(function (part) {
      const row = section.querySelector('[data-part="' + CSS.escape(part.node) + '"]');
      if (!row) return;
      const state = row.querySelector("[data-state]");
      if (state) {
        state.className = "state state-" + part.state;
        state.textContent = part.state + (part.state === "waiting" && part.job_state ? " (" + part.job_state.toLowerCase() + ")" : "");
      }
      text(row.querySelector("[data-job]"), part.slurm_job_id || "—");
      text(row.querySelector("[data-result]"),
        part.result + (part.elapsed_seconds !== null ? " (" + part.elapsed_seconds + " s)" : ""));
    });
  }
  function poll(section) {
    fetch(section.dataset.url, {headers: {Accept: "application/json"}, credentials: "same-origin"})
      .then(function (response) { if (!response.ok) throw new Error(response.status); return response.json(); })
      .then(function (data) {
        render(section, data);
        if (data.finished) { window.location.reload(); } else { window.setTimeout(function () { poll(section); }, POLL_MS); }
      })
      .catch(function () { window.setTimeout(function () { poll(section); }, POLL_MS * 3); });
  }
  document.querySelectorAll("[data-operation][data-live]").forEach(poll);
})();
