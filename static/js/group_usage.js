// The group page's chart: GPU-hours by member, one stacked bar trace per GPU type, from
// #group-usage-data (groups/charts.py). Numbers arrive as decimal strings; Plotly reads them.
(function () {
  "use strict";
  const source = document.getElementById("group-usage-data");
  const target = document.getElementById("group-usage-chart");
  if (!source || !target || typeof Plotly === "undefined") return;
  const data = JSON.parse(source.textContent || "{}");
  const traces = (data.traces || []).map(function (trace) {
    return {type: "bar", name: trace.name, x: data.members, y: trace.hours,
      hovertemplate: "%{x} " + trace.name + ": %{y} GPU-hours<extra></extra>"};
  });
  Plotly.react(target, traces, {
    barmode: "stack",
    margin: {t: 10, r: 10, b: 40, l: 50},
    legend: {orientation: "h", y: -0.2},
    yaxis: {title: {text: "GPU-hours"}, rangemode: "tozero"},
  }, {responsive: true, displayModeBar: false});
  target.dataset.drawn = "1";
})();
