// Campaign figures per day (credits/views_marketing.py _chart), from #marketing-data.
(function () {
  "use strict";
  const source = document.getElementById("marketing-data");
  if (!source || typeof Plotly === "undefined") return;
  const data = JSON.parse(source.textContent || "{}");
  const line = (name, key, axis) => ({type: "scatter", mode: "lines+markers", name: name, x: data.days, y: data[key], yaxis: axis});
  const traces = [
    line("sign-ups", "signups", "y"), line("verified", "verified", "y"), line("activated", "activated", "y"),
    line("credits granted", "granted", "y2"), line("credits spent", "spent", "y2"),
  ];
  const layout = {
    margin: {t: 10, r: 50, b: 40, l: 40},
    xaxis: {type: "date", tickformat: "%b %d"},
    yaxis: {title: {text: "people"}, rangemode: "tozero"},
    yaxis2: {title: {text: "credits"}, overlaying: "y", side: "right", rangemode: "tozero"},
    legend: {orientation: "h"},
  };
  Plotly.newPlot("marketing-chart", traces, layout, {responsive: true, displayModeBar: false});
})();
