// The request page: the start is typed in the browser's own time zone (sent along as `tz`);
// before sending, ask whether the slot is free (and for the nearest free starts when not) and
// what it would cost. The price is a nicety: when the quote API is missing or fails, nothing
// is shown.
(() => {
  const form = document.querySelector(".reservation-form");
  if (!form) return;
  const field = (name) => form.querySelector(`[name=${name}]`);
  const box = form.querySelector("[data-availability]");
  const checking = box.querySelector("[data-checking]");
  const text = box.querySelector("[data-availability-text]");
  const suggestionsRow = box.querySelector("[data-suggestions]");
  const suggestionButtons = box.querySelector("[data-suggestion-buttons]");
  const quote = box.querySelector("[data-quote]");
  const quoteTotal = box.querySelector("[data-quote-total]");
  const quoteCoverage = box.querySelector("[data-quote-coverage]");

  const csrf = field("csrfmiddlewaretoken").value;

  // Only a fresh form takes the browser's zone: a form sent back with errors keeps the zone
  // its date and time were typed in.
  const zone = Intl.DateTimeFormat().resolvedOptions().timeZone;
  if (zone && !form.querySelector(".field-error")) field("tz").value = zone;
  form.querySelectorAll("[data-tz-label]").forEach((label) => { label.textContent = field("tz").value; });

  const pad = (number) => String(number).padStart(2, "0");
  const localParts = (date) => ({
    day: `${date.getFullYear()}-${pad(date.getMonth() + 1)}-${pad(date.getDate())}`,
    time: `${pad(date.getHours())}:${pad(date.getMinutes())}`,
  });
  // Opened from a calendar slot: the server filled the start in UTC; show it in this zone.
  if (form.dataset.startUtc && field("tz").value === zone) {
    const parts = localParts(new Date(form.dataset.startUtc));
    field("start_date").value = parts.day;
    field("start_time").value = parts.time;
  }
  const label = (date) => date.toLocaleString([], { weekday: "short", day: "numeric", month: "short", hour: "2-digit", minute: "2-digit" });

  // The typed wall-clock time as a moment. The browser parses "YYYY-MM-DDTHH:MM" in its own
  // zone, which is the zone sent when the page set it; otherwise (a form sent back) fall
  // back to the server's answer on submit.
  function startMoment() {
    const day = field("start_date").value;
    const time = field("start_time").value;
    if (!/^\d{4}-\d{2}-\d{2}$/.test(day) || !/^\d{2}:\d{2}/.test(time)) return null;
    if (field("tz").value !== zone && field("tz").value !== "UTC") return null;
    const moment = field("tz").value === "UTC" ? new Date(`${day}T${time.slice(0, 5)}:00Z`) : new Date(`${day}T${time.slice(0, 5)}`);
    return Number.isNaN(moment.getTime()) ? null : moment;
  }

  function fill(moment) {
    // Suggestions are moments; the form speaks the browser's zone from here on.
    field("tz").value = zone || "UTC";
    form.querySelectorAll("[data-tz-label]").forEach((item) => { item.textContent = field("tz").value; });
    const parts = localParts(moment);
    field("start_date").value = parts.day;
    field("start_time").value = parts.time;
    check();
  }

  // Suggestions the server sent with a refused request fill the form the same way.
  form.querySelectorAll("[data-suggestion]").forEach((button) => {
    const moment = new Date(button.dataset.suggestion);
    button.textContent = label(moment);
    button.addEventListener("click", () => fill(moment));
  });

  let sequence = 0;
  async function check() {
    const start = startMoment();
    const count = field("gpu_count").value.trim();
    const duration = field("duration_minutes").value.trim();
    const gpuType = field("gpu_type") ? field("gpu_type").value : "";
    if (!start || !/^\d+$/.test(count) || !/^\d+$/.test(duration) || !gpuType) {
      text.textContent = "";
      suggestionsRow.hidden = true;
      quote.hidden = true;
      return;
    }
    const mine = ++sequence; // an older answer arriving late must not overwrite a newer one
    checking.hidden = false;
    const params = new URLSearchParams({ gpu_type: gpuType, count, start: start.toISOString(), duration });
    try {
      const response = await fetch(`${form.dataset.availabilityUrl}?${params}`, { credentials: "same-origin" });
      const answer = await response.json();
      if (mine !== sequence) return;
      suggestionsRow.hidden = true;
      suggestionButtons.replaceChildren();
      if (!response.ok) {
        const messages = Object.values(answer.errors || {}).flat();
        text.textContent = messages.join(" ") || answer.detail || "Could not check this slot.";
        text.className = "error";
      } else if (answer.available) {
        text.textContent = `Free: ${answer.free_gpus} of ${answer.capacity} ${gpuType} GPUs are free for that whole window.`;
        text.className = "ok";
      } else {
        text.textContent = `Not free: only ${answer.free_gpus} of ${answer.capacity} ${gpuType} GPUs are free for that whole window.`;
        text.className = "error";
        for (const suggestion of answer.suggestions) {
          const moment = new Date(suggestion);
          const button = document.createElement("button");
          button.type = "button";
          button.className = "suggestion";
          button.dataset.start = suggestion;
          button.textContent = label(moment);
          button.addEventListener("click", () => fill(moment));
          suggestionButtons.append(button, " ");
        }
        suggestionsRow.hidden = answer.suggestions.length === 0;
      }
    } catch (error) {
      if (mine === sequence) { text.textContent = ""; }
    } finally {
      if (mine === sequence) checking.hidden = true;
    }
    if (mine === sequence) price(mine, gpuType, Number(count), Number(duration));
  }

  async function price(mine, gpuType, count, minutes) {
    try {
      const response = await fetch(form.dataset.quoteUrl, {
        method: "POST",
        credentials: "same-origin",
        headers: { "Content-Type": "application/json", "X-CSRFToken": csrf },
        body: JSON.stringify({ gpu_type: gpuType, gpu_count: count, seconds: minutes * 60, group: null }),
      });
      if (!response.ok) throw new Error(String(response.status));
      const answer = await response.json();
      if (mine !== sequence || typeof answer.total !== "string") return;
      // Below a cent the rounded total says $0.00; the exact one says more (as the job form).
      quoteTotal.textContent = `$${answer.total_rounded && answer.total_rounded !== "0.00" ? answer.total_rounded : answer.total}`;
      quoteCoverage.textContent = window.quoteCoverage(answer.coverage);
      quote.hidden = false;
    } catch (error) {
      if (mine === sequence) quote.hidden = true;
    }
  }

  let timer = null;
  const later = () => { clearTimeout(timer); timer = setTimeout(check, 300); };
  ["gpu_type", "gpu_count", "start_date", "start_time", "duration_minutes"].forEach((name) => {
    const input = field(name);
    if (input) { input.addEventListener("input", later); input.addEventListener("change", later); }
  });
  check();
})();
