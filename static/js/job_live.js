// Live job state: a WebSocket pushes the signed-in user's job updates; while the socket
// is down we poll a small JSON endpoint instead, and keep trying to reconnect.
(function () {
  "use strict";
  const indicator = document.querySelector("[data-live-indicator]");
  const POLL_MS = 10000;
  const WATCH_MS = 30000;  // under the server's 60 s watch (jobs/live/watching.py)
  let watchTimer = null;
  let socket = null;
  let retryMs = 1000;
  let pollTimer = null;

  function setIndicator(text, ok) {
    if (!indicator) return;
    indicator.textContent = text;
    indicator.classList.toggle("live-ok", !!ok);
  }

  // As the server writes it, in this browser's zone (static/js/dates.js).
  const fmt = (iso) => window.portalDates.dateTime(iso);

  // The job page: its summary is rendered by the server and swapped in whole, so every
  // field (title, times, exit code, accounting, actions) follows the job, not just a few.
  const summaryFetches = new Map();
  let lastSeen = "";
  async function refreshSummary(box, job) {
    const seen = JSON.stringify(job);
    if (seen === lastSeen) return;  // a poll repeating what the page already shows
    lastSeen = seen;
    if (summaryFetches.get(box)) { summaryFetches.set(box, "again"); return; }
    summaryFetches.set(box, "busy");
    let current = box;
    try {
      const response = await fetch(box.dataset.jobSummary, {credentials: "same-origin"});
      if (response.ok) {
        const holder = document.createElement("div");
        holder.innerHTML = await response.text();
        const fresh = holder.querySelector("[data-job-summary]");
        if (fresh) { box.replaceWith(fresh); current = fresh; document.dispatchEvent(new CustomEvent("job-summary-updated", {detail: job})); }
      }
    } catch (e) { /* offline: the next update or poll tries again */ }
    const again = summaryFetches.get(box) === "again";
    summaryFetches.delete(box);
    if (again) { lastSeen = ""; refreshSummary(current, {}); }
  }

  function apply(job) {
    document.querySelectorAll(`[data-summary-of="${job.id}"]`).forEach((box) => refreshSummary(box, job));
    document.querySelectorAll(`[data-job-id="${job.id}"]`).forEach((el) => {
      el.querySelectorAll("[data-field]").forEach((field) => {
        const name = field.dataset.field;
        let value = job[name];
        if (name.endsWith("_time")) value = fmt(value);
        field.textContent = value || "";
        if (name === "state" || name === "state_label") field.className = `state state-${String(job.state).toLowerCase()}`;
        if (name === "state_label") field.title = job.state;
        if (name === "error") field.hidden = !value;
        if (name === "reason_short") field.title = job.reason_text ? `${job.reason_text} (Slurm: ${job.state_reason})` : "";
      });
    });
    const table = document.querySelector("table[data-live-jobs] tbody");
    if (table && !table.querySelector(`[data-job-id="${job.id}"]`) && document.querySelector("h1")?.textContent === "My jobs") {
      table.querySelector("tr.empty")?.remove();
      const row = document.createElement("tr");
      row.dataset.jobId = job.id;
      const cells = [`#${job.id}`, job.name, job.state_label, job.reason_short, job.nodes, "", fmt(job.start_time), fmt(job.end_time)];
      cells.forEach((text, i) => {
        const td = document.createElement("td");
        if (i === 0) {
          const a = document.createElement("a"); a.href = `/jobs/${job.id}/`; a.textContent = text; td.appendChild(a);
          const slurmId = document.createElement("span"); slurmId.className = "muted"; slurmId.dataset.field = "slurm_job_id"; slurmId.title = "Slurm's job id";
          slurmId.textContent = job.slurm_job_id ?? ""; td.append(" ", slurmId);
        }
        else if (i === 2) { const s = document.createElement("span"); s.className = `state state-${String(job.state).toLowerCase()}`; s.dataset.field = "state_label"; s.title = job.state; s.textContent = text; td.appendChild(s); }
        else { td.textContent = text || ""; }
        if (i === 3) td.dataset.field = "reason_short";
        if (i === 4) td.dataset.field = "nodes";
        if (i === 6) td.dataset.field = "start_time";
        if (i === 7) td.dataset.field = "end_time";
        row.appendChild(td);
      });
      table.prepend(row);
    }
  }

  async function poll() {
    try {
      const response = await fetch("/jobs/status.json", {headers: {Accept: "application/json"}, credentials: "same-origin"});
      if (response.status === 401) { stopPolling(); setIndicator("Live updates ended: please sign in again", false); return; }
      if (response.ok) (await response.json()).jobs.forEach(apply);
    } catch (e) { /* offline: try again on the next tick */ }
  }

  function startPolling() {
    if (!pollTimer) pollTimer = setInterval(poll, POLL_MS);
  }

  function stopPolling() {
    clearInterval(pollTimer);
    pollTimer = null;
  }

  function connect() {
    const scheme = location.protocol === "https:" ? "wss" : "ws";
    // batches=1: a mass change comes as one message of many jobs. A job's own page (its
    // summary, no live table) hears that job alone.
    const onlyJob = document.querySelector("table[data-live-jobs]") ? null : document.querySelector("[data-summary-of]")?.dataset.summaryOf;
    socket = new WebSocket(`${scheme}://${location.host}/ws/jobs/?batches=1${onlyJob ? `&job=${onlyJob}` : ""}`);
    socket.onopen = () => {
      retryMs = 1000; stopPolling(); setIndicator("Live", true); poll();
      // Still looking: the portal refreshes the expected start of watched pending jobs often.
      clearInterval(watchTimer);
      watchTimer = setInterval(() => { if (socket.readyState === WebSocket.OPEN) socket.send(JSON.stringify({type: "watch"})); }, WATCH_MS);
    };
    socket.onmessage = (event) => {
      const message = JSON.parse(event.data);
      if (message.type === "job") apply(message.job);
      else if (message.type === "jobs") message.jobs.forEach(apply);
    };
    socket.onclose = (event) => {
      if (event.code === 4404) {
        // A job page of a job that is not the user's own (or is gone): no live feed; poll.
        setIndicator("Refreshing every 10 s", false);
        startPolling();
        return;
      }
      if (event.code === 4403 || event.code === 4401) {
        // Signed out or the account was closed: nothing more will come; stop trying.
        setIndicator("Live updates ended: please sign in again", false);
        stopPolling();
        return;
      }
      setIndicator("Live updates paused; refreshing every 10 s", false);
      startPolling();
      setTimeout(connect, retryMs);
      retryMs = Math.min(retryMs * 2, 30000);
    };
  }

  connect();
})();
