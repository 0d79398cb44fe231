// The operations page's two charts, from the figures the view put in #operations-data.
(function () {
  "use strict";
  const source = document.getElementById("operations-data");
  if (!source || typeof Plotly === "undefined") {
    return;
  }
  const data = JSON.parse(source.textContent || "{}");
  const labels = data.labels || [];
  const unit = data.bucket === "week" ? "week starting" : "day";
  // Categories: every bucket of the period is a label (data or not), so the x axis is the whole period.
  const layout = function (yTitle, yaxis) {
    return {
      margin: {t: 10, r: 10, b: 40, l: 50},
      xaxis: {type: "category", title: {text: unit}, automargin: true},
      yaxis: Object.assign({title: {text: yTitle}, rangemode: "tozero", automargin: true}, yaxis || {}),
      legend: {orientation: "h", y: -0.3},
      hovermode: "x unified",
    };
  };
  const config = {responsive: true, displayModeBar: false};

  const utilisation = [
    {type: "bar", name: "all GPUs", x: labels, y: data.utilisation || [], marker: {color: "#3b6fd1"},
     hovertemplate: "%{y:.1f} %<extra>all GPUs</extra>"},
  ];
  const palette = ["#23844c", "#b7791f", "#8e44ad", "#c0392b", "#16a085"];
  Object.keys(data.by_type || {}).forEach(function (name, index) {
    utilisation.push({
      type: "scatter", mode: "lines+markers", name: name || "untyped", x: labels, y: data.by_type[name],
      line: {color: palette[index % palette.length]}, hovertemplate: "%{y:.1f} %<extra>" + (name || "untyped") + "</extra>",
    });
  });
  // Values are percent (83.5 is 83.5 %), drawn on a real 0-100 % scale.
  Plotly.newPlot("utilisation-chart", utilisation,
    layout("utilisation (%)", {range: data.utilisation_range || [0, 100], ticksuffix: " %", rangemode: "normal"}), config);

  const waits = [
    {type: "bar", name: "average", x: labels, y: data.average_wait_minutes || [], marker: {color: "#3b6fd1"},
     customdata: data.jobs || [], hovertemplate: "%{y:.1f} min (%{customdata} jobs)<extra>average</extra>"},
    {type: "scatter", mode: "lines+markers", name: "95th percentile", x: labels, y: data.p95_wait_minutes || [],
     line: {color: "#c0392b"}, hovertemplate: "%{y:.1f} min<extra>p95</extra>"},
  ];
  Plotly.newPlot("wait-chart", waits, layout("wait (minutes)"), config);
})();
