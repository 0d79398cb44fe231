// The usage page's stacked bars: one trace per GPU type, by day, from #usage-data
// (billing.usage.usage_page.MonthUsage.chart). Numbers arrive as decimal strings; Plotly reads them.
(function () {
  "use strict";
  const source = document.getElementById("usage-data");
  const target = document.getElementById("usage-chart");
  if (!source || !target || typeof Plotly === "undefined") return;
  const data = JSON.parse(source.textContent || "{}");
  const units = {charges: {title: "USD", hover: "$%{y}"}, gpu_hours: {title: "GPU-hours", hover: "%{y} h"}};

  function draw(measure) {
    const traces = (data.traces || []).map(function (trace) {
      // A day wide (in ms on a date axis): Plotly would size bars from the spacing of the
      // days present, and a month with one day of usage would get hairlines.
      return {type: "bar", name: trace.name, x: data.days, y: trace[measure], width: 0.8 * 86400000,
        hovertemplate: "%{x|%b %d} " + trace.name + ": " + units[measure].hover + "<extra></extra>"};
    });
    const layout = {
      barmode: "stack",
      margin: {t: 10, r: 10, b: 40, l: 50},
      legend: {orientation: "h", y: -0.2},
      xaxis: {type: "date", range: data.x_range, tickformat: "%b %d"},
      yaxis: {title: {text: units[measure].title}, rangemode: "tozero"},
    };
    Plotly.react(target, traces, layout, {responsive: true, displayModeBar: false});
    target.dataset.drawn = measure;
  }

  document.querySelectorAll("[data-show]").forEach(function (button) {
    button.addEventListener("click", function () {
      document.querySelectorAll("[data-show]").forEach(function (other) {
        other.setAttribute("aria-pressed", String(other === button));
      });
      draw(button.dataset.show);
    });
  });
  draw("charges");
})();
