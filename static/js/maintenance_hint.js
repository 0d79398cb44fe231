// The job form: when a job of the asked time limit would start, given the maintenance windows ahead
// (GET /api/v1/maintenance/, read once). A job that cannot end before a window that holds every node of
// its GPU type waits for the window's end (Slurm's MAINT reservation): say so, and the longest time
// limit that would start now.
(function () {
  "use strict";
  const hint = document.querySelector("[data-maintenance-hint]");
  const form = hint && hint.closest("form");
  const nodesData = document.getElementById("gpu-type-nodes");
  if (!form || !nodesData) return;
  const nodesByType = JSON.parse(nodesData.textContent || "{}");
  const field = (name) => form.querySelector(`[name="${name}"]`);
  let windows = [];

  function at(moment) {
    return moment.toLocaleString([], { dateStyle: "medium", timeStyle: "short" });
  }

  function holdsType(planned, gpuType) {
    if (!planned.nodes.length) return true;
    const ofType = nodesByType[gpuType] || [];
    return ofType.length > 0 && ofType.every((node) => planned.nodes.includes(node));
  }

  function update() {
    const text = (field("time_limit_minutes") || {}).value || "";
    const minutes = /^\d{1,7}$/.test(text.trim()) ? parseInt(text, 10) : null;
    const gpuType = (field("gpu_type") || {}).value || "";
    const now = new Date();
    const ends = minutes ? new Date(now.getTime() + minutes * 60000) : null;
    const blocking = ends && windows.find((w) => ends > w.start && now < w.end && holdsType(w, gpuType));
    if (!blocking) {
      hint.hidden = true;
      hint.textContent = "";
      return;
    }
    const room = Math.floor((blocking.start - now) / 60000);
    hint.textContent =
      `Maintenance from ${at(blocking.start)} to ${at(blocking.end)} (${blocking.reason}): a job of ${minutes} minutes ` +
      `asked now would still run when it starts, so it waits until ${at(blocking.end)}.` +
      (room > 0 ? ` A time limit of at most ${room} minutes starts before it.` : "");
    hint.hidden = false;
  }

  fetch(hint.dataset.windowsUrl, { headers: { Accept: "application/json" }, credentials: "same-origin" })
    .then((response) => (response.ok ? response.json() : []))
    .then((listed) => {
      windows = listed.map((w) => ({ start: new Date(w.start), end: new Date(w.end), nodes: w.nodes, reason: w.reason }));
      ["time_limit_minutes", "gpu_type"].forEach((name) => {
        const input = field(name);
        if (input) input.addEventListener("input", update);
        if (input) input.addEventListener("change", update);
      });
      update();
    })
    .catch(() => {});
})();
