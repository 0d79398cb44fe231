// Sign-ups per day on the marketing page, from #signups-data (console.views.signup_chart).
(function () {
  "use strict";
  const source = document.getElementById("signups-data");
  if (!source || typeof Plotly === "undefined") return;
  const data = JSON.parse(source.textContent || "{}");
  const layout = {
    margin: {t: 10, r: 10, b: 40, l: 40},
    // The whole period, whatever days have data: one day alone must not become the axis.
    xaxis: {type: "date", range: data.x_range, tickformat: "%b %d"},
    yaxis: {title: {text: "sign-ups"}, rangemode: "tozero", dtick: Math.max(...(data.counts || [0]), 0) < 5 ? 1 : null},
  };
  Plotly.newPlot("signups-chart", [{type: "bar", x: data.days, y: data.counts, marker: {color: "#3b6fd1"},
    hovertemplate: "%{x|%Y-%m-%d}: %{y}<extra></extra>"}], layout, {responsive: true, displayModeBar: false});
})();
