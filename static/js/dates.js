// Dates and times as the server writes them (gpupool/formats/en/formats.py): "7 Dec 2026, 14:05",
// a 24-hour clock, in this browser's time zone, which the server learns from the `tz` cookie
// (gpupool/time_zone.py) so that what it renders and what scripts write agree.
(function () {
  "use strict";
  const zone = Intl.DateTimeFormat().resolvedOptions().timeZone;
  if (zone && !document.cookie.split("; ").includes(`tz=${zone}`)) {
    document.cookie = `tz=${zone}; path=/; max-age=31536000; SameSite=Lax`;
  }
  const MONTHS = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"];
  const pad = (n) => String(n).padStart(2, "0");
  window.portalDates = {
    // An ISO moment (or a Date) as "7 Dec 2026, 14:05"; "" for nothing.
    dateTime(value) {
      if (!value) return "";
      const d = value instanceof Date ? value : new Date(value);
      return `${d.getDate()} ${MONTHS[d.getMonth()]} ${d.getFullYear()}, ${pad(d.getHours())}:${pad(d.getMinutes())}`;
    },
    // "14:05:09": a clock reading, for "updated at".
    clock(value) {
      const d = value instanceof Date ? value : new Date(value);
      return `${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}`;
    },
  };
})();
