// The lab view's charts (console/lab.py chart): GPU-hours by group stacked by type, and each
// group's share of the pool beside its share of the usage (fair-share pulls them together).
(function () {
  "use strict";
  const source = document.getElementById("lab-data");
  if (!source || typeof Plotly === "undefined") return;
  const data = JSON.parse(source.textContent || "{}");
  const config = {responsive: true, displayModeBar: false};
  const hours = document.getElementById("lab-hours-chart");
  if (hours) {
    Plotly.react(hours, (data.traces || []).map(function (trace) {
      return {type: "bar", name: trace.name, x: data.groups, y: trace.hours,
        hovertemplate: "%{x} " + trace.name + ": %{y} GPU-hours<extra></extra>"};
    }), {barmode: "stack", margin: {t: 10, r: 10, b: 60, l: 50}, legend: {orientation: "h", y: -0.3},
      yaxis: {title: {text: "GPU-hours"}, rangemode: "tozero"}}, config);
    hours.dataset.drawn = "1";
  }
  const share = document.getElementById("lab-share-chart");
  if (share) {
    Plotly.react(share, [
      {type: "bar", name: "share of the pool", x: data.groups, y: data.share},
      {type: "bar", name: "share of the usage", x: data.groups, y: data.usage},
    ], {barmode: "group", margin: {t: 10, r: 10, b: 60, l: 50}, legend: {orientation: "h", y: -0.3},
      yaxis: {tickformat: ".0%", rangemode: "tozero"}}, config);
    share.dataset.drawn = "1";
  }
})();
