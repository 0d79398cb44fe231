// Added by the portal's proxy to a session's notebook page (interactive/proxy.py): says when the
// session was warned for being idle, and when it stopped. Reads the proxy's own status path.
(function () {
  "use strict";
  let banner = null;
  function show(text, tone) {
    if (!banner) {
      banner = document.createElement("div");
      banner.setAttribute("role", "alert");
      banner.dataset.gpupoolNotice = "";
      banner.style.cssText = "position:fixed;left:0;right:0;top:0;z-index:100000;padding:.6em 1em;" +
        "font:14px system-ui,sans-serif;color:#111;text-align:center";
      document.body.appendChild(banner);
    }
    banner.style.background = tone === "stop" ? "#f8b4b4" : "#fde68a";
    banner.textContent = text;
    banner.hidden = false;
  }
  async function look() {
    try {
      const response = await fetch("/_gpupool/status", {credentials: "same-origin", cache: "no-store"});
      if (!response.ok) return;
      const status = await response.json();
      if (status.state === "stopped" || status.state === "failed") {
        show(status.stop_reason === "idle" ? "This session was stopped after being idle. Start it again from the portal."
          : "This session has stopped.", "stop");
      } else if (status.idle_warned_at) {
        const stops = new Date(Date.parse(status.idle_warned_at) + status.warning_seconds * 1000);
        show(`This session has been idle and stops at ${stops.toLocaleTimeString([], { hour: "2-digit", minute: "2-digit", hourCycle: "h23" })} unless you run something.`, "warn");
      } else if (banner) {
        banner.hidden = true;
      }
    } catch (e) { /* the proxy or the portal is away: look again later */ }
  }
  look();
  setInterval(look, 15000);
})();
