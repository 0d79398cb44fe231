// A GPU's last hour (raw samples) and last day (minute rollups) as Plotly charts.
(function () {
  "use strict";
  const hourDiv = document.getElementById("chart-hour");
  if (!hourDiv) return;
  // range: the window's real span from the server (an hour, a day), however few points there are.
  const layout = (title, range) => ({
    title: {text: title, font: {size: 14}},
    margin: {t: 36, r: 50, b: 36, l: 44},
    legend: {orientation: "h", y: -0.2},
    xaxis: {type: "date", range: range},
    yaxis: {title: "%", range: [0, 100]},
    yaxis2: {title: "°C / W", overlaying: "y", side: "right", rangemode: "tozero"},
  });
  function traces(series) {
    const memoryPct = series.memory_used_mb.map((used, i) => (100 * used) / (series.memory_total_mb[i] || 1));
    return [
      {x: series.t, y: series.compute_util, name: "Compute %", type: "scatter", line: {color: "#bd0026"}},
      {x: series.t, y: series.memory_util, name: "Memory bandwidth %", type: "scatter", line: {color: "#4292c6"}},
      {x: series.t, y: memoryPct, name: "Memory used %", type: "scatter", line: {color: "#6a51a3", dash: "dot"}},
      {x: series.t, y: series.temperature_c, name: "Temperature °C", yaxis: "y2", type: "scatter", line: {color: "#fd8d3c"}},
      {x: series.t, y: series.power_w, name: "Power W", yaxis: "y2", type: "scatter", line: {color: "#41ab5d"}},
    ];
  }
  async function draw() {
    const response = await fetch(hourDiv.dataset.seriesUrl, {credentials: "same-origin"});
    if (!response.ok) return;
    const data = await response.json();
    const config = {responsive: true, displayModeBar: false};
    Plotly.react("chart-hour", traces(data.hour), layout("Last hour", data.hour_range), config);
    Plotly.react("chart-day", traces(data.day), layout("Last day (per minute)", data.day_range), config);
    hourDiv.dataset.points = String(data.hour.t.length);
  }
  draw();
  setInterval(draw, 30000);
})();
