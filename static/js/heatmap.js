// The GPU heatmap: one cell per GPU, grouped by GPU type and node, coloured by the chosen
// metric. Built as one HTML string per refresh (fast at 10,000 cells); one delegated
// listener serves every cell's tooltip and click. Refreshes every 10 s without reload.
(function () {
  "use strict";
  const root = document.getElementById("heatmap");
  const tip = document.getElementById("heatmap-tip");
  const status = document.querySelector("[data-heatmap-status]");
  const help = document.querySelector("[data-metric-help]");
  const REFRESH_MS = 10000;
  const HELP = [root.dataset.computeHelp, root.dataset.memoryHelp];
  const NAMES = ["Compute", "Memory bandwidth"];
  let metric = 0;
  let data = null;

  // A perceptual ramp from cool (idle) to hot (busy).
  const STOPS = [[237, 242, 250], [158, 202, 225], [66, 146, 198], [253, 141, 60], [189, 0, 38]];
  function colour(value) {
    if (value < 0) return "#d9dce3";
    const x = Math.min(100, value) / 100 * (STOPS.length - 1);
    const i = Math.min(STOPS.length - 2, Math.floor(x));
    const f = x - i;
    const c = STOPS[i].map((v, k) => Math.round(v + (STOPS[i + 1][k] - v) * f));
    return `rgb(${c[0]},${c[1]},${c[2]})`;
  }

  function escapeHtml(text) {
    return String(text).replace(/[&<>"']/g, (ch) => ({"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;"}[ch]));
  }

  // A node's page, or one of its GPUs' (gpu >= 0); a further cluster's says which cluster.
  function pageUrl(node, gpu) {
    const path = `${root.dataset.nodeUrl}${encodeURIComponent(node.n)}/` + (gpu >= 0 ? `gpus/${gpu}/` : "");
    return node.c === data.own ? path : `${path}?cluster=${encodeURIComponent(node.c)}`;
  }

  function render() {
    if (!data) return;
    // By cluster (the portal's own first, as the server lists them), then by GPU type.
    const clusters = new Set(data.nodes.map((node) => node.c));
    const groups = new Map();
    data.nodes.forEach((node, n) => {
      const key = `${node.c}\u0000${node.t}`;
      if (!groups.has(key)) groups.set(key, {cluster: node.c, type: node.t, nodes: []});
      groups.get(key).nodes.push(n);
    });
    const parts = [];
    for (const group of groups.values()) {
      const title = (clusters.size > 1 ? `${group.cluster} · ` : "") + (group.type || "no GPUs");
      parts.push(`<section class="hm-type" data-cluster="${escapeHtml(group.cluster)}"><h2>${escapeHtml(title)}</h2><div class="hm-nodes">`);
      for (const n of group.nodes) {
        const node = data.nodes[n];
        const down = /DOWN|DRAIN|FAIL|NOT_RESPONDING/.test(node.s);
        const name = `<a class="hm-node-name" href="${escapeHtml(pageUrl(node, -1))}">${escapeHtml(node.n)}</a>`;
        parts.push(`<div class="hm-node${down ? " hm-down" : ""}" data-node="${escapeHtml(node.n)}">${name}`);
        // The state in words; Slurm's own term for those who know it.
        parts.push(`<span class="hm-node-state" title="Slurm: ${escapeHtml(node.s)}">${escapeHtml(node.w ?? node.s)}</span><div class="hm-cells">`);
        node.g.forEach((gpu, g) => {
          const busy = gpu[3] !== -1 ? " hm-busy" : "";
          parts.push(`<span class="hm-cell${busy}" data-n="${n}" data-g="${g}" style="background:${colour(gpu[metric])}"></span>`);
        });
        parts.push("</div></div>");
      }
      parts.push("</div></section>");
    }
    root.innerHTML = parts.join("");
    const gpus = data.nodes.reduce((sum, node) => sum + node.g.length, 0);
    status.textContent = `${gpus} GPUs on ${data.nodes.length} nodes · updated ${window.portalDates.clock(data.generated)}`;
    document.querySelector("[data-emulated]").hidden = !data.sources.includes("emulator");
  }

  function tooltip(cell) {
    const node = data.nodes[+cell.dataset.n];
    const gpu = node.g[+cell.dataset.g];
    const where = node.c === data.own ? "" : `${escapeHtml(node.c)} · `;
    const lines = [`<strong>${where}${escapeHtml(node.n)} · GPU ${cell.dataset.g}</strong> <span class="muted">${escapeHtml(node.t)}</span>`];
    if (gpu[0] < 0) lines.push("No telemetry from this GPU.");
    else {
      lines.push(`Compute: ${gpu[0]}%`, `Memory bandwidth: ${gpu[1]}%`, `Memory used: ${gpu[2]}%`);
      if (gpu[4] > 60) lines.push(`<span class="error">Last sample ${gpu[4]} s ago</span>`);
    }
    if (gpu[3] === -2) lines.push("In use");
    else if (gpu[3] >= 0) {
      const job = data.jobs[gpu[3]];
      lines.push(`Job ${escapeHtml(job.slurm ?? "")} <em>${escapeHtml(job.name)}</em>${job.mine ? " (yours)" : ` · ${escapeHtml(job.user)}`}`);
    } else lines.push("Idle");
    if (node.r) lines.push(`<span class="muted">${escapeHtml(node.w ?? node.s)}: ${escapeHtml(node.r)}</span>`);
    return lines.join("<br>");
  }

  root.addEventListener("mouseover", (event) => {
    const cell = event.target.closest(".hm-cell");
    if (!cell) return;
    tip.innerHTML = tooltip(cell);
    tip.hidden = false;
    const box = cell.getBoundingClientRect();
    tip.style.left = `${Math.min(window.innerWidth - 260, box.left + window.scrollX)}px`;
    tip.style.top = `${box.bottom + window.scrollY + 6}px`;
  });
  root.addEventListener("mouseout", (event) => {
    if (event.target.closest(".hm-cell")) tip.hidden = true;
  });
  root.addEventListener("click", (event) => {
    const cell = event.target.closest(".hm-cell");
    if (!cell) return;
    location.href = pageUrl(data.nodes[+cell.dataset.n], +cell.dataset.g);
  });

  document.querySelectorAll("button.metric").forEach((button) => {
    button.addEventListener("click", () => {
      metric = +button.dataset.metric;
      document.querySelectorAll("button.metric").forEach((b) => b.classList.toggle("active", b === button));
      help.textContent = HELP[metric];
      render();
    });
  });

  async function load() {
    try {
      const response = await fetch(root.dataset.url, {credentials: "same-origin"});
      if (!response.ok) throw new Error(`HTTP ${response.status}`);
      data = await response.json();
      const started = performance.now();
      render();
      root.dataset.renderMs = String(Math.round(performance.now() - started));
    } catch (error) {
      status.textContent = `Could not refresh (${error.message}); showing the last data.`;
    }
  }
  load();
  setInterval(load, REFRESH_MS);
})();
