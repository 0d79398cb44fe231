// A session's page: its state is pushed over the jobs socket ("session" messages) and the
// summary is swapped in whole; while the socket is down, and every 30 s for the running cost,
// the summary is fetched again.
(function () {
  "use strict";
  const indicator = document.querySelector("[data-live-indicator]");
  let retryMs = 1000;

  function box() { return document.querySelector("[data-session-summary]"); }

  let fetching = false;
  async function refresh() {
    const current = box();
    if (!current || fetching) return;
    fetching = true;
    try {
      const response = await fetch(current.dataset.sessionSummary, {credentials: "same-origin"});
      if (response.ok) {
        const holder = document.createElement("div");
        holder.innerHTML = await response.text();
        const fresh = holder.querySelector("[data-session-summary]");
        if (fresh) {
          // "JupyterLab requested" is old news once the session is further along.
          if (fresh.dataset.sessionState !== current.dataset.sessionState) {
            document.querySelectorAll(".messages li.transient").forEach((note) => note.remove());
          }
          current.replaceWith(fresh);
        }
      }
    } catch (e) { /* offline: the next push or tick tries again */ }
    fetching = false;
  }

  function connect() {
    const scheme = location.protocol === "https:" ? "wss" : "ws";
    const socket = new WebSocket(`${scheme}://${location.host}/ws/jobs/`);
    socket.onopen = () => { retryMs = 1000; if (indicator) indicator.textContent = "live"; refresh(); };
    socket.onmessage = (event) => {
      const message = JSON.parse(event.data);
      const current = box();
      if (message.type === "session" && current && String(message.session.id) === current.dataset.sessionId) refresh();
    };
    socket.onclose = (event) => {
      if (indicator) indicator.textContent = "reconnecting…";
      if (event.code === 4401 || event.code === 4403) return;
      setTimeout(connect, retryMs);
      retryMs = Math.min(retryMs * 2, 30000);
    };
  }
  connect();
  setInterval(refresh, 30000);
})();
