// A finished job's GPU compute (%) and memory (GB) over its run (#efficiency-series, from
// telemetry/efficiency.py): one chart, two axes; the memory asked per GPU as a dashed line.
(function () {
  "use strict";
  const source = document.getElementById("efficiency-series");
  const target = document.querySelector("[data-efficiency-plot]");
  if (typeof Plotly === "undefined" || !source || !target) return;
  const points = JSON.parse(source.textContent || "[]");
  if (!points.length) return;
  const times = points.map((p) => p[0]);
  Plotly.react(target, [
    { x: times, y: points.map((p) => p[1]), name: "compute %", type: "scatter", mode: "lines", line: { color: "#3b82f6" } },
    { x: times, y: points.map((p) => p[2]), name: "memory GB", type: "scatter", mode: "lines", yaxis: "y2", line: { color: "#22a06b" } },
  ], {
    height: 240, margin: { t: 10, r: 50, b: 35, l: 45 }, legend: { orientation: "h", y: -0.25 },
    yaxis: { title: { text: "%" }, range: [0, 100] },
    yaxis2: { title: { text: "GB" }, overlaying: "y", side: "right", rangemode: "tozero" },
  }, { responsive: true, displayModeBar: false });
  target.dataset.drawn = "1";
})();
