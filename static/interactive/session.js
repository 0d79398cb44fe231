// A session's page: its summary is a live part (static/js/live_parts.js), re-read every 30 s
// for the running cost while the session may still change, and at once when the jobs socket
// says this session changed ("session" messages).
(function () {
  "use strict";
  const indicator = document.querySelector("[data-live-indicator]");
  const summary = document.querySelector("[data-session-summary]");
  if (!summary) return;
  const sessionId = summary.dataset.sessionId;
  const reread = () => document.dispatchEvent(new CustomEvent("live:refresh"));
  let retryMs = 1000;

  function connect() {
    const scheme = location.protocol === "https:" ? "wss" : "ws";
    const socket = new WebSocket(`${scheme}://${location.host}/ws/jobs/`);
    socket.onopen = () => { retryMs = 1000; if (indicator) indicator.textContent = "live"; reread(); };
    socket.onmessage = (event) => {
      const message = JSON.parse(event.data);
      if (message.type === "session" && String(message.session.id) === sessionId) reread();
    };
    socket.onclose = (event) => {
      if (indicator) indicator.textContent = "reconnecting…";
      if (event.code === 4401 || event.code === 4403) return;
      setTimeout(connect, retryMs);
      retryMs = Math.min(retryMs * 2, 30000);
    };
  }
  connect();
})();
