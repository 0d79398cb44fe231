// A sweep's grid, live: the signed-in user's job updates come over the same socket as the job
// pages' (/ws/jobs/); an update of a task of this sweep recolours its square and the counts.
// While the socket is down, the page polls the sweep's cells every 5 s; it also polls every
// 30 s while up, to mend anything a lost message left behind.
(function () {
  "use strict";
  const summary = document.querySelector("[data-sweep]");
  if (!summary) return;
  const sweepId = parseInt(summary.dataset.sweep, 10);
  const cellsUrl = summary.dataset.cellsUrl;
  const indicator = document.querySelector("[data-live-indicator]");
  const counts = document.querySelector("[data-sweep-counts]");
  const cells = new Map();
  const CLASSES = { SUBMITTING: "waiting", PENDING: "waiting", RUNNING: "running", COMPLETING: "running", SUSPENDED: "running", COMPLETED: "done", CANCELLED: "cancelled" };
  // Every task a square, from the cells the page carries ([index, job id, state]).
  const grid = document.querySelector("[data-sweep-grid]");
  const jobsBase = grid.dataset.jobsBase;
  const fragment = document.createDocumentFragment();
  JSON.parse(document.getElementById("sweep-cells").textContent).forEach(([index, jobId, state]) => {
    const cell = document.createElement("a");
    cell.setAttribute("role", "listitem");
    cell.dataset.index = String(index);
    cell.dataset.job = String(jobId);
    cell.dataset.state = state;
    cell.href = `${jobsBase}${jobId}/`;
    cell.className = `cell ${CLASSES[state] || "failed"}`;
    cell.title = `task ${index}: ${state.toLowerCase()}`;
    cells.set(index, cell);
    fragment.appendChild(cell);
  });
  grid.appendChild(fragment);
  let socket = null, pollTimer = null, retryMs = 1000;

  function paint(index, jobId, state) {
    const cell = cells.get(index);
    if (!cell) return;
    // An earlier attempt of a rerun point never paints over the current one.
    if (jobId < parseInt(cell.dataset.job, 10)) return;
    if (jobId > parseInt(cell.dataset.job, 10)) {
      cell.dataset.job = String(jobId);
      cell.href = cell.href.replace(/\/\d+\/$/, `/${jobId}/`);
    }
    cell.dataset.state = state;
    cell.className = `cell ${CLASSES[state] || "failed"}`;
    cell.title = `task ${index}: ${state.toLowerCase()}`;
  }

  function recount() {
    const byState = {};
    cells.forEach((cell) => { byState[cell.dataset.state] = (byState[cell.dataset.state] || 0) + 1; });
    counts.replaceChildren(...Object.keys(byState).sort().flatMap((state) => {
      const badge = document.createElement("span");
      badge.className = `badge state-${state.toLowerCase()}`;
      badge.dataset.count = state;
      badge.textContent = `${state.toLowerCase()} ${byState[state]}`;
      return [badge, document.createTextNode(" ")];
    }));
  }

  async function poll() {
    try {
      const response = await fetch(cellsUrl, { headers: { Accept: "application/json" }, credentials: "same-origin" });
      if (!response.ok) return;
      const body = await response.json();
      body.cells.forEach(([index, jobId, state]) => paint(index, jobId, state));
      recount();
    } catch (e) { /* offline: the next tick tries again */ }
  }

  function setIndicator(text) { if (indicator) indicator.textContent = text; }
  function pollEvery(ms) { clearInterval(pollTimer); pollTimer = setInterval(poll, ms); }

  // The task table, the steering and the metric are re-read (static/js/live_parts.js) a moment
  // after this sweep's tasks change: one re-read for a burst of changes.
  let rereadTimer = null;
  function scheduleReread() {
    if (rereadTimer) return;
    rereadTimer = setTimeout(() => { rereadTimer = null; document.dispatchEvent(new CustomEvent("live:refresh")); }, 2000);
  }

  let recountPending = false;
  function scheduleRecount() {
    if (recountPending) return;
    recountPending = true;
    requestAnimationFrame(() => { recountPending = false; recount(); });
  }

  function connect() {
    const scheme = location.protocol === "https:" ? "wss" : "ws";
    // batches=1: a mass change comes as one message of many jobs.
    socket = new WebSocket(`${scheme}://${location.host}/ws/jobs/?batches=1`);
    socket.onopen = () => { retryMs = 1000; setIndicator("Live"); pollEvery(30000); poll(); };
    socket.onmessage = (event) => {
      const message = JSON.parse(event.data);
      const jobs = message.type === "job" ? [message.job] : message.type === "jobs" ? message.jobs : [];
      const ours = jobs.filter((job) => job.sweep === sweepId);
      ours.forEach((job) => paint(job.sweep_index, job.id, job.state));
      if (ours.length) { scheduleRecount(); scheduleReread(); }
    };
    socket.onclose = (event) => {
      if (event.code === 4403 || event.code === 4401) { setIndicator("Live updates ended: please sign in again"); clearInterval(pollTimer); return; }
      setIndicator("Live updates paused; refreshing every 5 s");
      pollEvery(5000);
      setTimeout(connect, retryMs);
      retryMs = Math.min(retryMs * 2, 30000);
    };
  }
  connect();
})();
