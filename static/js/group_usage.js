// The group pages' stacked bar charts, one bar per member and one trace per GPU type: GPU-hours
// (#group-usage-chart from #group-usage-data, groups/charts.py) and cost in USD
// (#group-money-chart from #group-money-data, billing/views_group.py). Numbers arrive as
// decimal strings; Plotly reads them.
(function () {
  "use strict";
  if (typeof Plotly === "undefined") return;
  [["group-usage-data", "group-usage-chart"], ["group-money-data", "group-money-chart"]].forEach(function (ids) {
    const source = document.getElementById(ids[0]);
    const target = document.getElementById(ids[1]);
    if (!source || !target) return;
    const data = JSON.parse(source.textContent || "{}");
    const unit = data.unit || "GPU-hours";
    const traces = (data.traces || []).map(function (trace) {
      return {type: "bar", name: trace.name, x: data.members, y: trace.values || trace.hours,
        hovertemplate: "%{x} " + trace.name + ": %{y} " + unit + "<extra></extra>"};
    });
    Plotly.react(target, traces, {
      barmode: "stack",
      margin: {t: 10, r: 10, b: 40, l: 50},
      legend: {orientation: "h", y: -0.2},
      yaxis: {title: {text: unit}, rangemode: "tozero"},
    }, {responsive: true, displayModeBar: false});
    target.dataset.drawn = "1";
  });
})();
