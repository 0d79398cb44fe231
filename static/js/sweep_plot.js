// The sweep's metric against each parameter: one scatter per parameter (#sweep-series, from
// jobs/sweeps/views.py), every task a point, the best one marked; a point opens its task. Drawn
// again when the metric's part of the page is swapped in fresh (static/js/live_parts.js).
(function () {
  "use strict";
  if (typeof Plotly === "undefined") return;
  function draw() {
  const source = document.getElementById("sweep-series");
  const target = document.querySelector("[data-sweep-plots]");
  if (!source || !target || target.dataset.drawn) return;
  target.dataset.drawn = "1";
  const data = JSON.parse(source.textContent || "{}");
  const best = document.querySelector("[data-best] a");
  const bestIndex = best ? parseInt(best.textContent.replace(/\D+/g, ""), 10) : null;
  Object.entries(data.series || {}).forEach(([name, points]) => {
    const plot = document.createElement("div");
    plot.dataset.parameter = name;
    target.appendChild(plot);
    const numeric = points.every((point) => typeof point[0] === "number");
    const positive = numeric && points.every((point) => point[0] > 0);
    const spread = positive && Math.max(...points.map((p) => p[0])) / Math.min(...points.map((p) => p[0])) >= 100;
    Plotly.react(plot, [{
      type: "scatter", mode: "markers", x: points.map((p) => p[0]), y: points.map((p) => p[1]),
      customdata: points.map((p) => p[2]),
      marker: { size: points.map((p) => (p[2] === bestIndex ? 14 : 8)), color: points.map((p) => (p[2] === bestIndex ? "#22a06b" : "#3b82f6")) },
      hovertemplate: `${name}=%{x}<br>${data.metric}=%{y}<br>task %{customdata}<extra></extra>`,
    }], {
      margin: { t: 10, r: 10, b: 45, l: 55 },
      xaxis: { title: { text: name }, type: spread ? "log" : (numeric ? "linear" : "category") },
      yaxis: { title: { text: data.metric } },
    }, { responsive: true, displayModeBar: false });
    plot.dataset.drawn = "1";
  });
  }
  draw();
  document.addEventListener("live:swapped", draw);
})();
