// The job page: tail the logs while the job is alive, show the diagnosis when it ends,
// and tick the elapsed time. State itself arrives through job_live.js.
(function () {
  "use strict";
  const stdout = document.querySelector('[data-log="stdout"]');
  const stderr = document.querySelector('[data-log="stderr"]');
  const setup = document.querySelector('[data-log="setup"]');
  // The summary (with the elapsed field) is replaced on live updates: look it up each time.
  const elapsedField = () => document.querySelector("[data-elapsed]");
  if (!stdout) return;
  const url = stdout.dataset.logsUrl;
  const FINAL = new Set(["COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY", "PREEMPTED", "BOOT_FAIL", "DEADLINE", "SUBMIT_FAILED"]);

  function setLog(pre, text) {
    if (pre.textContent === text) return;
    const atBottom = pre.scrollHeight - pre.scrollTop - pre.clientHeight < 20;
    pre.textContent = text;
    if (atBottom) pre.scrollTop = pre.scrollHeight;
  }

  function renderDiagnosis(findings) {
    let box = document.querySelector("[data-diagnosis]");
    if (!findings.length) { if (box) box.remove(); return; }
    if (!box) {
      box = document.createElement("section");
      box.className = "diagnosis";
      box.setAttribute("role", "alert");
      box.dataset.diagnosis = "";
      document.querySelector("[data-job-summary] dl.facts").before(box);
    }
    box.replaceChildren(...findings.map((f) => {
      const div = document.createElement("div");
      div.className = "finding";
      const title = document.createElement("strong"); title.textContent = f.title;
      const cause = document.createElement("p"); cause.textContent = f.cause;
      const fix = document.createElement("p"); fix.textContent = "Fix: " + f.fix;
      div.append(title, cause, fix);
      if (f.evidence) { const pre = document.createElement("pre"); pre.textContent = f.evidence; div.append(pre); }
      return div;
    }));
  }

  let timer = null;
  let emptyReadsAfterEnd = 0;
  async function refresh() {
    try {
      const response = await fetch(url, {credentials: "same-origin"});
      if (!response.ok) return;
      const data = await response.json();
      setLog(stdout, data.stdout);
      setLog(stderr, data.stderr);
      if (setup) setLog(setup, data.setup);
      renderDiagnosis(data.diagnosis);
      // A job's files can show a moment after Slurm says it ended (a shared filesystem's cache,
      // a further cluster's nodes): with nothing read yet, look a few more times before stopping.
      if (FINAL.has(data.job.state)) {
        const nothingYet = !data.stdout_size && !data.stderr_size;
        if (!nothingYet || ++emptyReadsAfterEnd >= 5) clearInterval(timer);
      }
    } catch (e) { /* try again next tick */ }
  }

  function tick() {
    const elapsed = elapsedField();
    if (!elapsed || !elapsed.dataset.start) return;
    const start = new Date(elapsed.dataset.start);
    const end = elapsed.dataset.end ? new Date(elapsed.dataset.end) : new Date();
    let s = Math.max(0, Math.round((end - start) / 1000));
    const h = Math.floor(s / 3600); s -= h * 3600;
    const m = Math.floor(s / 60); s -= m * 60;
    elapsed.textContent = (h ? h + " h " : "") + (h || m ? m + " min " : "") + s + " s";
  }

  // A running job's cost so far follows the clock, not only its state changes: while the page
  // shows one, the server's estimate (the summary's cost section) is read again every COST_MS.
  const COST_MS = 5000;
  // Swaps the part `selector` of the page for the same part of a freshly read summary.
  async function refreshPart(selector) {
    const summary = document.querySelector("[data-job-summary]");
    if (!summary) return;
    try {
      const response = await fetch(summary.dataset.jobSummary, {credentials: "same-origin"});
      if (!response.ok) return;
      const holder = document.createElement("div");
      holder.innerHTML = await response.text();
      const fresh = holder.querySelector(selector);
      const current = document.querySelector(selector);
      if (fresh && current) current.replaceWith(fresh);
    } catch (e) { /* offline: the next tick tries again */ }
  }
  function refreshCost() {
    if (document.querySelector("[data-job-cost] [data-field=cost_so_far]")) refreshPart("[data-job-cost]");
  }

  // While the job's datasets are being copied to its node, their progress is read again every
  // STAGING_MS (staging changes no job state, so no live update brings it).
  const STAGING_MS = 2000;
  function refreshStaging() {
    if (document.querySelector("[data-job-datasets] [data-staging-active]")) refreshPart("[data-job-datasets]");
  }

  timer = setInterval(refresh, 3000);
  setInterval(refreshStaging, STAGING_MS);
  setInterval(tick, 1000);
  setInterval(refreshCost, COST_MS);
  tick();
})();
