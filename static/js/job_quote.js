// The job form: what the job costs at most for its time limit, from POST /api/v1/billing/quote
// (the one quote: the plan that would pay, the group's when the job is charged to a group that
// holds one; spot at each window's share), before it is submitted. The upper bound takes every
// GPU's whole memory for the whole time limit; the quote rounds a GPU-memory request up to whole
// shards, as Slurm holds it. The quote's `coverage` says what the payer's plan hours and credits
// would cover and what is left to pay, split as a finished run is charged.
(function () {
  "use strict";
  const out = document.querySelector("[data-job-quote]");
  const form = out && out.closest("form");
  if (!form) return;
  const field = (name) => form.querySelector(`[name="${name}"]`);
  const watched = ["gpu_type", "gpu_count", "gpu_memory_gb", "time_limit_minutes", "nvme_gb", "spot", "group"];
  let timer = null;
  let inFlight = null;

  function wholeNumber(name) {
    const input = field(name);
    const text = input ? input.value.trim() : "";
    // Only plain digits: the form's own validation says what is wrong with anything else.
    return /^\d{1,9}$/.test(text) ? parseInt(text, 10) : null;
  }

  function request() {
    const select = field("gpu_type");
    const minutes = wholeNumber("time_limit_minutes");
    if (!select || !minutes) return null;
    const option = select.selectedOptions[0] || {};
    const memoryGb = parseInt((option.dataset || {}).memoryGb, 10) || 0;
    const count = wholeNumber("gpu_count");
    const memory = wholeNumber("gpu_memory_gb");
    const body = { gpu_type: select.value, seconds: minutes * 60, nvme_gb: wholeNumber("nvme_gb") || 0 };
    if (count) {
      body.gpu_count = count;
      body.gpu_memory_gb = count * memoryGb;
    } else if (memory) {
      body.gpu_count = 0;
      body.gpu_memory_gb = memory;
    } else {
      return null;
    }
    const spot = field("spot");
    if (spot && spot.checked) body.spot = true;
    const group = field("group");
    if (group && !body.spot) body.group = /^\d+$/.test(group.value) ? parseInt(group.value, 10) : null;
    const datasets = Array.from(form.querySelectorAll('[name="datasets"]:checked'))
      .map((box) => parseInt(box.value, 10)).filter((id) => id > 0);
    if (datasets.length) body.datasets = datasets;
    return body;
  }

  function show(text) {
    out.textContent = text;
    out.hidden = !text;
  }

  function describe(quote) {
    const minutes = quote.seconds / 60;
    const parts = quote.lines
      .filter((line) => line.amount !== "0.00" && line.amount !== "0")
      .map((line) => `${line.description} ${window.quoteMoney(line.amount)}`);
    const payer = quote.payer === "you" ? "" : ", charged to the group";
    return `At most ${window.quoteMoney(quote.total)} for the time limit (${minutes} min) at the ` +
      `${quote.plan} plan's prices${payer}` + (parts.length ? ` (${parts.join(" + ")})` : "") +
      ", before included hours and credits." + window.quoteCoverage(quote.coverage);
  }


  async function refresh() {
    const body = request();
    if (inFlight) inFlight.abort();
    if (!body) { show(""); return; }
    inFlight = new AbortController();
    const token = form.querySelector('[name="csrfmiddlewaretoken"]');
    try {
      const response = await fetch(out.dataset.quoteUrl, {
        method: "POST",
        credentials: "same-origin",
        headers: { "Content-Type": "application/json", "X-CSRFToken": token ? token.value : "" },
        body: JSON.stringify(body),
        signal: inFlight.signal,
      });
      const data = await response.json();
      show(response.ok ? describe(data) : `No price yet: ${data.detail || response.status}`);
    } catch (error) {
      if (error.name !== "AbortError") show("");
    }
  }

  function schedule() {
    clearTimeout(timer);
    timer = setTimeout(refresh, 300);
  }

  watched.forEach((name) => {
    const input = field(name);
    if (input) {
      input.addEventListener("input", schedule);
      input.addEventListener("change", schedule);
    }
  });
  form.querySelectorAll('[name="datasets"]').forEach((box) => box.addEventListener("change", schedule));
  refresh();
})();
